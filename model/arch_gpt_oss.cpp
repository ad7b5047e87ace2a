// gpt-oss (GptOssForCausalLM, and GGUF "gpt-oss" files: gpt-oss-20b and
// gpt-oss-120b). Against Llama:
// - attention with biases on q, k, v and o, and a learned sink per head: a
//   logit that joins each softmax's denominator and attends to nothing;
// - every other layer local (a sliding window, layer 0 first), all layers
//   with one RoPE (YaRN in the published models);
// - in every layer a mixture of experts: a router with a bias, the top k by a
//   softmax over the chosen logits, and experts with biases whose activation
//   is the clamped SwiGLU (up + 1) * g * sigmoid(alpha g), g = min(gate,
//   limit), up clamped to [-limit, limit].
// Checkpoints store each layer's experts as one tensor per projection:
// gate_up_proj [n_expert, n_embd, 2 n_ff] with gate and up interleaved by
// column, and down_proj [n_expert, n_ff, n_embd], both transposed against
// nn.Linear; the published ones hold them in MXFP4 (*_blocks, *_scales),
// rewritten at load into GGUF's MXFP4 blocks.
#include <cstdint>
#include <cstring>
#include <string>

#include "core/dtype_mxfp4.hpp"
#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

// Expert e's biases: gate_up's [E, 2I] interleaved as its rows are, and
// down's [E, H] as they stand.
void bind_expert_biases(WeightStore& store, const float* gu_bias, const float* dn_bias, int64_t e, int64_t n_ff,
                        int64_t n_embd, ExpertWeights& ex) {
  float* bg = store.floats(n_ff);
  float* bu = store.floats(n_ff);
  for (int64_t j = 0; j < n_ff; ++j) {
    bg[j] = gu_bias[e * 2 * n_ff + 2 * j];
    bu[j] = gu_bias[e * 2 * n_ff + 2 * j + 1];
  }
  ex.b_gate = bg;
  ex.b_up = bu;
  ex.b_down = dn_bias + e * n_embd;
}

// The fused, transposed experts (gate and up interleaved by column) and
// their biases.
void bind_dense_experts(HfWeights& src, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  bind_fused_experts(src, c, p + "gate_up_proj", p + "down_proj", /*interleaved=*/true, l);
  const float* gu_bias = src.vector_rows(p + "gate_up_proj_bias", c.n_expert, 2 * c.n_ff);  // [E, 2I]
  const float* dn_bias = src.vector_rows(p + "down_proj_bias", c.n_expert, c.n_embd);       // [E, H]
  for (int64_t e = 0; e < c.n_expert; ++e) {
    bind_expert_biases(src.store(), gu_bias, dn_bias, e, c.n_ff, c.n_embd, l.experts[static_cast<size_t>(e)]);
  }
}

// The published checkpoints' experts in MXFP4: blocks [E, rows, n_in / 32,
// 16] and E8M0 scales [E, rows, n_in / 32] in transformers' layout, rows as
// nn.Linear's (gate and up interleaved in gate_up's), rewritten at load into
// GGML's MXFP4 blocks, so the same kernels run them as a GGUF file's.
void bind_mxfp4_experts(HfWeights& src, const ModelConfig& c, const std::string& p, LayerWeights& l) {
  const int64_t E = c.n_expert, H = c.n_embd, I = c.n_ff;
  if (H % 32 != 0 || I % 32 != 0) {
    throw Error(Errc::bad_format, "'" + p + "gate_up_proj_blocks': MXFP4 experts need hidden_size (" +
                                      std::to_string(H) + ") and intermediate_size (" + std::to_string(I) +
                                      ") to be multiples of 32");
  }
  const safetensors::TensorInfo& gub = src.bytes(p + "gate_up_proj_blocks", {E, 2 * I, H / 32, 16});
  const safetensors::TensorInfo& gus = src.bytes(p + "gate_up_proj_scales", {E, 2 * I, H / 32});
  const safetensors::TensorInfo& dnb = src.bytes(p + "down_proj_blocks", {E, H, I / 32, 16});
  const safetensors::TensorInfo& dns = src.bytes(p + "down_proj_scales", {E, H, I / 32});
  const float* gu_bias = src.vector_rows(p + "gate_up_proj_bias", E, 2 * I);  // [E, 2I]
  const float* dn_bias = src.vector_rows(p + "down_proj_bias", E, H);         // [E, H]
  WeightStore& store = src.store();
  // Row r of a [rows, n_in] matrix of expert e: n_in / 32 blocks.
  auto convert_row = [](const safetensors::TensorInfo& blocks, const safetensors::TensorInfo& scales, int64_t row,
                        int64_t n_blocks, uint8_t* dst) {
    mxfp4_blocks_from_hf(blocks.data + row * n_blocks * 16, scales.data + row * n_blocks, n_blocks, dst);
  };
  const int64_t gate_row = row_bytes(DType::mxfp4, H);
  const int64_t down_row = row_bytes(DType::mxfp4, I);
  l.experts.resize(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    ExpertWeights& ex = l.experts[static_cast<size_t>(e)];
    auto* gate = static_cast<uint8_t*>(store.allocate(static_cast<size_t>(I * gate_row)));
    auto* up = static_cast<uint8_t*>(store.allocate(static_cast<size_t>(I * gate_row)));
    auto* down = static_cast<uint8_t*>(store.allocate(static_cast<size_t>(H * down_row)));
    for (int64_t j = 0; j < I; ++j) {
      convert_row(gub, gus, e * 2 * I + 2 * j, H / 32, gate + j * gate_row);
      convert_row(gub, gus, e * 2 * I + 2 * j + 1, H / 32, up + j * gate_row);
    }
    for (int64_t i = 0; i < H; ++i) convert_row(dnb, dns, e * H + i, I / 32, down + i * down_row);
    ex.w_gate = Weight{.data = gate, .type = DType::mxfp4, .n_in = H, .n_out = I};
    ex.w_up = Weight{.data = up, .type = DType::mxfp4, .n_in = H, .n_out = I};
    ex.w_down = Weight{.data = down, .type = DType::mxfp4, .n_in = I, .n_out = H};
    bind_expert_biases(store, gu_bias, dn_bias, e, I, H, ex);
  }
}

void load_gpt_oss(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "gpt-oss";
  read_llama_config(cfg, c);
  c.n_expert = cfg.has("num_local_experts") ? cfg.get_int("num_local_experts") : cfg.get_int("num_experts");
  // Published configs say both num_experts_per_tok and experts_per_token.
  c.n_expert_used = cfg.has("num_experts_per_tok") ? cfg.get_int("num_experts_per_tok")
                                                    : cfg.get_int("experts_per_token");
  if (c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
    cfg.fail(Errc::bad_format, "num_experts_per_tok must be in 1..num_local_experts");
  }
  c.expert_weights_norm = true;  // softmax over the chosen experts' logits
  c.expert_swiglu_alpha = static_cast<float>(cfg.get_float("swiglu_alpha", 1.702));
  c.expert_swiglu_limit = static_cast<float>(cfg.get_float("swiglu_limit", 7.0));
  if (!(c.expert_swiglu_limit > 0.0f) || !(c.expert_swiglu_alpha > 0.0f)) {
    cfg.fail(Errc::bad_format, "swiglu_limit and swiglu_alpha must be positive");
  }
  read_layer_kinds(cfg, c, 2);
  c.local_layers_share_rope = true;
  check_config(cfg, c);
  const bool bias = cfg.get_bool("attention_bias", true);
  bind_llama_weights(src, c, {.qkv_bias = bias, .o_bias = bias, .dense_ffn = false}, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_sinks = src.vector(p + "self_attn.sinks", c.n_head);
    l.ffn_router = src.matrix(p + "mlp.router.weight", c.n_embd, c.n_expert);
    l.ffn_router_b = src.vector(p + "mlp.router.bias", c.n_expert);
    if (src.has(p + "mlp.experts.gate_up_proj_blocks")) {
      bind_mxfp4_experts(src, c, p + "mlp.experts.", l);
    } else {
      bind_dense_experts(src, c, p + "mlp.experts.", l);
    }
  }
}

void gpt_oss_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // biases, sinks, window
  layers::moe_block(ctx, il, x);                                              // biases, clamped SwiGLU
}

}  // namespace

const Architecture arch::gpt_oss{.name = "gpt-oss",
                                 .hf_class = "GptOssForCausalLM",
                                 .load_hf = load_gpt_oss,
                                 .embed = layers::embed_tokens,
                                 .layer = gpt_oss_layer,
                                 .output_norm = arch::rms_output_norm};

}  // namespace troupe
