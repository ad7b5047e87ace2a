// HfWeights: checked, converted views of safetensors tensors, and the
// tensor names the Llama family shares.
#include "model/hf_weights.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "model/hf_8bit.hpp"
#include "model/hf_int4.hpp"
#include "model/model_loaders.hpp"

namespace troupe {
namespace {

}  // namespace

std::string HfWeights::resolve(std::string_view name) const {
  if (bare_ && name.starts_with("model.")) name.remove_prefix(6);
  if (!name.starts_with(rename_from_)) return std::string(name);
  return rename_to_ + std::string(name.substr(rename_from_.size()));
}

const safetensors::TensorInfo& HfWeights::expect(std::string_view name, std::initializer_list<int64_t> shape) const {
  const safetensors::TensorInfo& t = ckpt_.tensor(resolve(name));
  if (!std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end())) {
    throw Error(Errc::bad_format, t.file + ": tensor '" + t.name + "' has shape " + safetensors::shape_string(t.shape) +
                                      ", expected " + safetensors::shape_string(std::vector<int64_t>(shape)));
  }
  return t;
}

const safetensors::TensorInfo& HfWeights::expect_either(std::string_view name, std::initializer_list<int64_t> a,
                                                        std::initializer_list<int64_t> b) const {
  const safetensors::TensorInfo& t = ckpt_.tensor(resolve(name));
  if (!std::equal(t.shape.begin(), t.shape.end(), a.begin(), a.end()) &&
      !std::equal(t.shape.begin(), t.shape.end(), b.begin(), b.end())) {
    throw Error(Errc::bad_format, t.file + ": tensor '" + t.name + "' has shape " + safetensors::shape_string(t.shape) +
                                      ", expected " + safetensors::shape_string(std::vector<int64_t>(a)) + " or " +
                                      safetensors::shape_string(std::vector<int64_t>(b)));
  }
  return t;
}

const safetensors::TensorInfo& HfWeights::bytes(std::string_view name, std::initializer_list<int64_t> shape) const {
  const safetensors::TensorInfo* t = ckpt_.find(resolve(name));
  if (t == nullptr) return ckpt_.tensor(resolve(name));  // throws: the missing tensor, named
  if (t->dtype != "U8") {
    throw Error(Errc::bad_format, t->file + ": tensor '" + t->name + "' has dtype " + t->dtype + ", expected U8");
  }
  if (!std::equal(t->shape.begin(), t->shape.end(), shape.begin(), shape.end())) {
    throw Error(Errc::bad_format, t->file + ": tensor '" + t->name + "' has shape " +
                                      safetensors::shape_string(t->shape) + ", expected " +
                                      safetensors::shape_string(std::vector<int64_t>(shape)));
  }
  return *t;
}

ThreadPool& HfWeights::pool() {
  if (!pool_) pool_ = std::make_unique<ThreadPool>();
  return *pool_;
}

Weight HfWeights::eight_bit_matrix(const safetensors::TensorInfo& t, int64_t n_in, int64_t n_out) {
  if (t.shape != std::vector<int64_t>{n_out, n_in}) {
    throw Error(Errc::bad_format, t.file + ": tensor '" + t.name + "' has shape " + safetensors::shape_string(t.shape) +
                                      ", expected " + safetensors::shape_string({n_out, n_in}));
  }
  constexpr std::string_view kSuffix = "weight";
  const std::string scale_name = std::string_view(t.name).ends_with(kSuffix)
                                     ? t.name.substr(0, t.name.size() - kSuffix.size()) + quant_->scale_suffix
                                     : t.name + "." + quant_->scale_suffix;
  const safetensors::TensorInfo* scale = ckpt_.find(scale_name);
  if (scale == nullptr) {
    throw Error(Errc::bad_format, t.file + ": " + t.dtype + " tensor '" + t.name + "' has no scale '" + scale_name + "'");
  }
  return read_8bit(t, *scale, *quant_, store_, pool());
}

// base: the module's name with its trailing '.' ("model.layers.0.mlp.up_proj.").
Weight HfWeights::int4_matrix(const std::string& base, int64_t n_in, int64_t n_out) {
  const bool gptq_awq = quant_->kind != HfQuantScheme::Kind::int4_packed;
  const Int4Tensors t{.codes = ckpt_.find(base + (gptq_awq ? "qweight" : "weight_packed")),
                      .scale = ckpt_.find(base + (gptq_awq ? "scales" : "weight_scale")),
                      .zero = ckpt_.find(base + (gptq_awq ? "qzeros" : "weight_zero_point")),
                      .g_idx = quant_->kind == HfQuantScheme::Kind::gptq ? ckpt_.find(base + "g_idx") : nullptr};
  return read_int4(t, *quant_, n_in, n_out, store_, pool());
}

// PEFT names a module as the model class holds it, which is the name an
// architecture asks for; a checkpoint stored under other names (bare,
// renamed) is also tried by its own.
Weight HfWeights::with_lora(std::string_view name, Weight w) const {
  if (lora_ != nullptr) {
    lora_->attach(std::string(name), w);
    if (w.lora == nullptr) lora_->attach(resolve(name), w);
  }
  return w;
}

Weight HfWeights::matrix(std::string_view name, int64_t n_in, int64_t n_out) {
  return with_lora(name, stored_matrix(name, n_in, n_out));
}

Weight HfWeights::transposed(std::string_view name, int64_t n_in, int64_t n_out) {
  return with_lora(name, stored_transposed(name, n_in, n_out));
}

Weight HfWeights::stored_matrix(std::string_view name, int64_t n_in, int64_t n_out) {
  const bool eight_bit = quant_ && (quant_->kind == HfQuantScheme::Kind::fp8 || quant_->kind == HfQuantScheme::Kind::int8);
  if (eight_bit) {
    const safetensors::TensorInfo* raw = ckpt_.find(resolve(name));
    if (raw != nullptr && raw->dtype == (quant_->kind == HfQuantScheme::Kind::fp8 ? "F8_E4M3" : "I8")) {
      return eight_bit_matrix(*raw, n_in, n_out);
    }
  }
  if (quant_ && !eight_bit && name.ends_with("weight")) {
    const std::string full = resolve(name);
    const std::string base = full.substr(0, full.size() - std::string_view("weight").size());
    const char* codes = quant_->kind == HfQuantScheme::Kind::int4_packed ? "weight_packed" : "qweight";
    if (ckpt_.find(full) == nullptr && ckpt_.find(base + codes) != nullptr) return int4_matrix(base, n_in, n_out);
  }
  const safetensors::TensorInfo& t = expect(name, {n_out, n_in});
  const auto elem = static_cast<uintptr_t>(row_bytes(*t.type, 1));
  const void* data = t.data;
  // Kernels read rows as float/uint16 arrays; the file promises no alignment.
  if (reinterpret_cast<uintptr_t>(t.data) % elem != 0) {
    void* copy = store_.allocate(static_cast<size_t>(t.n_bytes));
    std::memcpy(copy, t.data, static_cast<size_t>(t.n_bytes));
    data = copy;
  }
  return Weight{.data = data, .type = *t.type, .n_in = n_in, .n_out = n_out};
}

Weight HfWeights::stored_transposed(std::string_view name, int64_t n_in, int64_t n_out) {
  const safetensors::TensorInfo& t = expect(name, {n_in, n_out});
  const auto elem = static_cast<size_t>(row_bytes(*t.type, 1));
  auto* dst = static_cast<uint8_t*>(store_.allocate(static_cast<size_t>(t.n_bytes)));
  // src[i][o] -> dst[o][i], element by element (memcpy: src may be unaligned).
  for (int64_t i = 0; i < n_in; ++i) {
    const uint8_t* src_row = t.data + static_cast<size_t>(i * n_out) * elem;
    for (int64_t o = 0; o < n_out; ++o) {
      std::memcpy(dst + static_cast<size_t>(o * n_in + i) * elem, src_row + static_cast<size_t>(o) * elem, elem);
    }
  }
  return Weight{.data = dst, .type = *t.type, .n_in = n_in, .n_out = n_out};
}

const float* HfWeights::vector(std::string_view name, int64_t n) {
  const safetensors::TensorInfo& t = expect(name, {n});
  return store_f32(store_, *t.type, t.data, n);
}

const float* HfWeights::vector_rows(std::string_view name, int64_t n_rows, int64_t n_cols) {
  const safetensors::TensorInfo& t = expect(name, {n_rows, n_cols});
  return store_f32(store_, *t.type, t.data, n_rows * n_cols);
}

const float* HfWeights::vector_plus_one(std::string_view name, int64_t n) {
  const float* w = vector(name, n);
  float* out = store_.floats(n);
  for (int64_t i = 0; i < n; ++i) out[i] = 1.0f + w[i];
  return out;
}

void bind_fused_experts(HfWeights& src, const ModelConfig& c, const std::string& gate_up, const std::string& down,
                        bool interleaved, LayerWeights& l) {
  const int64_t E = c.n_expert, H = c.n_embd, I = c.n_ff;
  // gpt-oss's (interleaved) are only ever transposed: with its n_ff equal
  // to n_embd, down_proj's shape could not tell.
  const safetensors::TensorInfo& gu = interleaved ? src.expect(gate_up, {E, H, 2 * I})
                                                  : src.expect_either(gate_up, {E, 2 * I, H}, {E, H, 2 * I});
  const safetensors::TensorInfo& dn = interleaved ? src.expect(down, {E, I, H})
                                                  : src.expect_either(down, {E, H, I}, {E, I, H});
  const bool gu_linear = !interleaved && gu.shape[1] == 2 * I && gu.shape[2] == H;
  const bool dn_linear = !interleaved && dn.shape[1] == H && dn.shape[2] == I;
  const auto elem = static_cast<size_t>(row_bytes(*gu.type, 1));
  const auto dn_elem = static_cast<size_t>(row_bytes(*dn.type, 1));
  WeightStore& store = src.store();
  l.experts.resize(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    ExpertWeights& ex = l.experts[static_cast<size_t>(e)];
    if (gu_linear) {  // [2I, H]: gate rows, then up rows
      const uint8_t* base = gu.data + static_cast<size_t>(e * 2 * I * H) * elem;
      ex.w_gate = Weight{.data = base, .type = *gu.type, .n_in = H, .n_out = I};
      ex.w_up = Weight{.data = base + static_cast<size_t>(I * H) * elem, .type = *gu.type, .n_in = H, .n_out = I};
    } else {
      auto* gate = static_cast<uint8_t*>(store.allocate(static_cast<size_t>(I * H) * elem));
      auto* up = static_cast<uint8_t*>(store.allocate(static_cast<size_t>(I * H) * elem));
      // gate_up[e][i][g(j)] -> gate[j][i], gate_up[e][i][u(j)] -> up[j][i]:
      // g(j) = j, u(j) = I + j; interleaved g(j) = 2j, u(j) = 2j + 1.
      const uint8_t* base = gu.data + static_cast<size_t>(e * H * 2 * I) * elem;
      for (int64_t i = 0; i < H; ++i) {
        const uint8_t* row = base + static_cast<size_t>(i * 2 * I) * elem;
        for (int64_t j = 0; j < I; ++j) {
          const int64_t g = interleaved ? 2 * j : j, u = interleaved ? 2 * j + 1 : I + j;
          std::memcpy(gate + static_cast<size_t>(j * H + i) * elem, row + static_cast<size_t>(g) * elem, elem);
          std::memcpy(up + static_cast<size_t>(j * H + i) * elem, row + static_cast<size_t>(u) * elem, elem);
        }
      }
      ex.w_gate = Weight{.data = gate, .type = *gu.type, .n_in = H, .n_out = I};
      ex.w_up = Weight{.data = up, .type = *gu.type, .n_in = H, .n_out = I};
    }
    if (dn_linear) {  // [H, I]
      ex.w_down = Weight{.data = dn.data + static_cast<size_t>(e * H * I) * dn_elem, .type = *dn.type, .n_in = I,
                         .n_out = H};
      continue;
    }
    // down[e][j][i] -> w_down[i][j]
    auto* rows = static_cast<uint8_t*>(store.allocate(static_cast<size_t>(H * I) * dn_elem));
    const uint8_t* dbase = dn.data + static_cast<size_t>(e * I * H) * dn_elem;
    for (int64_t j = 0; j < I; ++j) {
      for (int64_t i = 0; i < H; ++i) {
        std::memcpy(rows + static_cast<size_t>(i * I + j) * dn_elem, dbase + static_cast<size_t>(j * H + i) * dn_elem,
                    dn_elem);
      }
    }
    ex.w_down = Weight{.data = rows, .type = *dn.type, .n_in = I, .n_out = H};
  }
}

void bind_experts(HfWeights& src, const ModelConfig& c, const ExpertTensorNames& names, ModelWeights& w,
                  int64_t first_layer) {
  for (int64_t il = first_layer; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + "." + std::string(names.block);
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.ffn_router = src.matrix(p + "gate.weight", c.n_embd, c.n_expert);
    if (src.has(p + "experts.gate_up_proj")) {  // Qwen3-VL-MoE's checkpoints
      bind_fused_experts(src, c, p + "experts.gate_up_proj", p + "experts.down_proj", /*interleaved=*/false, l);
      continue;
    }
    l.experts.resize(static_cast<size_t>(c.n_expert));
    for (int64_t e = 0; e < c.n_expert; ++e) {
      const std::string x = p + "experts." + std::to_string(e) + ".";
      ExpertWeights& ex = l.experts[static_cast<size_t>(e)];
      ex.w_gate = src.matrix(x + std::string(names.gate) + ".weight", c.n_embd, c.n_ff);
      ex.w_up = src.matrix(x + std::string(names.up) + ".weight", c.n_embd, c.n_ff);
      ex.w_down = src.matrix(x + std::string(names.down) + ".weight", c.n_ff, c.n_embd);
    }
  }
}

void bind_post_norm_weights(HfWeights& src, const ModelConfig& c, ModelWeights& w) {
  bind_model_ends(src, c, w);
  const int64_t q_norm = c.qk_norm_whole ? c.q_dim() : c.head_dim;
  const int64_t k_norm = c.qk_norm_whole ? c.kv_dim() : c.head_dim;
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.wq = src.matrix(p + "self_attn.q_proj.weight", c.n_embd, c.q_dim());
    l.wk = src.matrix(p + "self_attn.k_proj.weight", c.n_embd, c.kv_dim());
    l.wv = src.matrix(p + "self_attn.v_proj.weight", c.n_embd, c.kv_dim());
    l.wo = src.matrix(p + "self_attn.o_proj.weight", c.q_dim(), c.n_embd);
    l.q_norm = src.vector(p + "self_attn.q_norm.weight", q_norm);
    l.k_norm = src.vector(p + "self_attn.k_norm.weight", k_norm);
    l.attn_post_norm = src.vector(p + "post_attention_layernorm.weight", c.n_embd);
    l.ffn_post_norm = src.vector(p + "post_feedforward_layernorm.weight", c.n_embd);
    l.w_gate = src.matrix(p + "mlp.gate_proj.weight", c.n_embd, c.n_ff);
    l.w_up = src.matrix(p + "mlp.up_proj.weight", c.n_embd, c.n_ff);
    l.w_down = src.matrix(p + "mlp.down_proj.weight", c.n_ff, c.n_embd);
  }
}

void bind_deepseek_ffn(HfWeights& src, const ModelConfig& c, const DeepseekFfn& f, ModelWeights& w) {
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".mlp.";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    if (!f.is_moe(il)) {
      l.w_gate = src.matrix(p + "gate_proj.weight", c.n_embd, c.n_ff_dense);
      l.w_up = src.matrix(p + "up_proj.weight", c.n_embd, c.n_ff_dense);
      l.w_down = src.matrix(p + "down_proj.weight", c.n_ff_dense, c.n_embd);
      continue;
    }
    l.ffn_router = src.matrix(p + "gate.weight", c.n_embd, c.n_expert);
    if (!f.score_bias.empty()) {
      const std::string bias = p + std::string(f.score_bias);
      l.expert_score_bias = f.bias_row ? src.vector_rows(bias, 1, c.n_expert) : src.vector(bias, c.n_expert);
    }
    l.experts.resize(static_cast<size_t>(c.n_expert));
    for (int64_t e = 0; e < c.n_expert; ++e) {
      const std::string x = p + "experts." + std::to_string(e) + ".";
      ExpertWeights& ex = l.experts[static_cast<size_t>(e)];
      ex.w_gate = src.matrix(x + "gate_proj.weight", c.n_embd, c.n_ff);
      ex.w_up = src.matrix(x + "up_proj.weight", c.n_embd, c.n_ff);
      ex.w_down = src.matrix(x + "down_proj.weight", c.n_ff, c.n_embd);
    }
    if (c.n_ff_shared > 0) {
      l.shared.w_gate = src.matrix(p + "shared_experts.gate_proj.weight", c.n_embd, c.n_ff_shared);
      l.shared.w_up = src.matrix(p + "shared_experts.up_proj.weight", c.n_embd, c.n_ff_shared);
      l.shared.w_down = src.matrix(p + "shared_experts.down_proj.weight", c.n_ff_shared, c.n_embd);
    }
  }
}

Weight weight_rows(const Weight& w, int64_t row0, int64_t n_rows) {
  const auto* base = static_cast<const uint8_t*>(w.data);
  return Weight{.data = base + row0 * row_bytes(w.type, w.n_in),
                .type = w.type,
                .n_in = w.n_in,
                .n_out = n_rows,
                .lora = w.lora,
                .lora_row0 = w.lora_row0 + row0};
}

void bind_model_ends(HfWeights& src, const ModelConfig& c, ModelWeights& w) {
  w.tok_embd = src.matrix("model.embed_tokens.weight", c.n_embd, c.n_vocab);
  w.output_norm = src.vector("model.norm.weight", c.n_embd);
  if (c.tied_output) {
    w.output = w.tok_embd;
  } else if (src.has("lm_head.weight") || !src.embedding_model()) {
    w.output = src.matrix("lm_head.weight", c.n_embd, c.n_vocab);
  }
  w.layers.assign(static_cast<size_t>(c.n_layer), LayerWeights{});
}

void bind_llama_weights(HfWeights& src, const ModelConfig& c, const LlamaTensors& t, ModelWeights& w) {
  bind_model_ends(src, c, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = src.vector(p + std::string(t.attn_norm) + ".weight", c.n_embd);
    if (t.fused) {
      // [q_dim + 2 kv_dim, n_embd]: rows of q, then k, then v.
      const Weight qkv = src.matrix(p + "self_attn.qkv_proj.weight", c.n_embd, c.q_dim() + 2 * c.kv_dim());
      l.wq = weight_rows(qkv, 0, c.q_dim());
      l.wk = weight_rows(qkv, c.q_dim(), c.kv_dim());
      l.wv = weight_rows(qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
    } else {
      l.wq = src.matrix(p + "self_attn.q_proj.weight", c.n_embd, c.q_dim());
      l.wk = src.matrix(p + "self_attn.k_proj.weight", c.n_embd, c.kv_dim());
      l.wv = src.matrix(p + "self_attn.v_proj.weight", c.n_embd, c.kv_dim());
    }
    l.wo = src.matrix(p + "self_attn.o_proj.weight", c.q_dim(), c.n_embd);
    if (t.qkv_bias) {
      l.bq = src.vector(p + "self_attn.q_proj.bias", c.q_dim());
      l.bk = src.vector(p + "self_attn.k_proj.bias", c.kv_dim());
      l.bv = src.vector(p + "self_attn.v_proj.bias", c.kv_dim());
    }
    if (t.o_bias) l.bo = src.vector(p + "self_attn.o_proj.bias", c.n_embd);
    if (t.qk_norm) {
      l.q_norm = src.vector(p + "self_attn.q_norm.weight", c.head_dim);
      l.k_norm = src.vector(p + "self_attn.k_norm.weight", c.head_dim);
    }
    l.ffn_norm = src.vector(p + std::string(t.ffn_norm) + ".weight", c.n_embd);
    if (t.dense_ffn && t.fused) {
      // [2 n_ff, n_embd]: rows of gate, then up.
      const Weight gate_up = src.matrix(p + "mlp.gate_up_proj.weight", c.n_embd, 2 * c.n_ff);
      l.w_gate = weight_rows(gate_up, 0, c.n_ff);
      l.w_up = weight_rows(gate_up, c.n_ff, c.n_ff);
    } else if (t.dense_ffn) {
      l.w_gate = src.matrix(p + "mlp.gate_proj.weight", c.n_embd, c.n_ff);
      l.w_up = src.matrix(p + "mlp.up_proj.weight", c.n_embd, c.n_ff);
    }
    if (t.dense_ffn) l.w_down = src.matrix(p + "mlp.down_proj.weight", c.n_ff, c.n_embd);
  }
}

}  // namespace troupe
