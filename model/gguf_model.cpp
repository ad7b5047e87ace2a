// The GGUF loader behind Model::load: which architecture names it reads
// (kGgufArchs; docs/models.md lists them), the hyperparameters every file
// carries, and the weights bound in place to the mapped tensor data (no copy
// unless quantization is asked for). The families that need more are read
// in gguf_model_families.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/error.hpp"
#include "model/gguf.hpp"
#include "model/gguf_model_impl.hpp"
#include "model/gguf_vocab.hpp"
#include "model/model.hpp"
#include "model/model_loaders.hpp"
#include "model/pooling.hpp"
#include "model/rope_scaling.hpp"
#include "model/sequence_classifier.hpp"

namespace troupe {
namespace gguf_load {

constexpr GgufArch kGgufArchs[] = {
    {"llama", kernels::RopeLayout::normal, false, false, false, false, false},
    {"qwen2", kernels::RopeLayout::neox, false, false, false, false, false},
    {"qwen3", kernels::RopeLayout::neox, true, false, false, false, false},
    {"qwen2moe", kernels::RopeLayout::neox, false, true, false, false, false},
    {"qwen3moe", kernels::RopeLayout::neox, true, true, false, false, false},
    {"gemma2", kernels::RopeLayout::neox, false, false, true, false, false},
    {"gemma3", kernels::RopeLayout::neox, true, false, true, false, false},
    {"phi3", kernels::RopeLayout::neox, false, false, false, true, false},
    {"smollm3", kernels::RopeLayout::normal, false, false, false, false, false},
    {"olmo2", kernels::RopeLayout::neox, false, false, false, false, false, GgufNorms::rms_after},
    {"starcoder2", kernels::RopeLayout::neox, false, false, false, false, false, GgufNorms::layer_before},
    {"granite", kernels::RopeLayout::normal, false, false, false, false, true},
    {"gpt-oss", kernels::RopeLayout::neox, false, true, false, false, false},
    {"glm4", kernels::RopeLayout::normal, false, false, false, false, false, GgufNorms::rms_sandwich},
    {"glm4moe", kernels::RopeLayout::neox, false, true, false, false, false},
    {"exaone4", kernels::RopeLayout::neox, true, false, false, false, false, GgufNorms::rms_after},
    {"ernie4_5", kernels::RopeLayout::normal, false, false, false, false, false},
    {"ernie4_5-moe", kernels::RopeLayout::normal, false, true, false, false, false},
    {"deepseek2", kernels::RopeLayout::normal, false, true, false, false, false},
    {"command-r", kernels::RopeLayout::normal, false, false, false, false, false, GgufNorms::layer_parallel},
    {"cohere2", kernels::RopeLayout::normal, false, false, false, false, false, GgufNorms::layer_parallel},
    {"lfm2", kernels::RopeLayout::neox, true, false, false, false, false},
    {"lfm2moe", kernels::RopeLayout::neox, true, true, false, false, false},
    {"mistral3", kernels::RopeLayout::normal, false, false, false, false, false, GgufNorms::rms_before, "ministral3"},
    {"seed_oss", kernels::RopeLayout::neox, false, false, false, false, false, GgufNorms::rms_before, "llama"},
    // Qwen3-VL's rope sections and deepstack layers act only on image tokens
    // (a text token's position axes are equal).
    {"qwen3vl", kernels::RopeLayout::neox, true, false, false, false, false, GgufNorms::rms_before, "qwen3"},
    {"qwen3vlmoe", kernels::RopeLayout::neox, true, true, false, false, false, GgufNorms::rms_before, "qwen3moe"},
    {"olmoe", kernels::RopeLayout::neox, false, true, false, false, false},
    {"granitemoe", kernels::RopeLayout::normal, false, true, false, false, true},
    {"hunyuan-dense", kernels::RopeLayout::neox, true, false, false, false, false},
    {"minimax-m2", kernels::RopeLayout::neox, false, true, false, false, false},
    {"apertus", kernels::RopeLayout::neox, true, false, false, false, false},
    {"qwen3next", kernels::RopeLayout::neox, true, true, false, false, false},
    {"qwen35", kernels::RopeLayout::neox, true, false, false, false, false},
    {"qwen35moe", kernels::RopeLayout::neox, true, true, false, false, false},
    // Granite 4.0-H: experts optional (Micro has none); Granite's scales.
    {"granitehybrid", kernels::RopeLayout::normal, false, false, false, false, true},
    // An encoder, bound by GgufModel::bind_bert (the fields above do not apply).
    {"bert", kernels::RopeLayout::normal, false, false, false, false, false},
    // ModernBERT, bound by GgufModel::bind_modernbert.
    {"modern-bert", kernels::RopeLayout::neox, false, false, false, false, false},
    // NomicBERT, bound by GgufModel::bind_nomic_bert.
    {"nomic-bert", kernels::RopeLayout::neox, false, false, false, false, false},
};

const GgufArch& gguf_arch(const std::string& path, const std::string& name) {
  std::string names;
  for (const GgufArch& a : kGgufArchs) {
    if (a.name == name) return a;
    names += (names.empty() ? "" : ", ") + std::string(a.name);
  }
  throw Error(Errc::unsupported, path + ": architecture '" + name + "' is not supported; supported: " + names);
}

Weight GgufModel::matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  const gguf::TensorInfo& t = file_.tensor(name);
  file_.expect_shape(t, {n_in, n_out});
  Weight w{.data = t.data, .type = t.type, .n_in = n_in, .n_out = n_out};
  if (lora_ != nullptr) lora_->attach(name, w);
  return w;
}

Weight GgufModel::expert_matrix(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert,
                                int64_t e) const {
  const gguf::TensorInfo& t = file_.tensor(name);
  file_.expect_shape(t, {n_in, n_out, n_expert});
  const int64_t bytes = n_out * row_bytes(t.type, n_in);  // experts are whole matrices apart
  return Weight{.data = static_cast<const unsigned char*>(t.data) + e * bytes, .type = t.type, .n_in = n_in,
                .n_out = n_out};
}

// The layout llama.cpp writes: one 3-D tensor per projection holding every
// expert, and the router as ffn_gate_inp.
void GgufModel::bind_experts(const std::string& b, LayerWeights& l) const {
  const ModelConfig& c = config_;
  l.ffn_router = matrix(b + "ffn_gate_inp.weight", c.n_embd, c.n_expert);
  l.experts.resize(static_cast<size_t>(c.n_expert));
  for (int64_t e = 0; e < c.n_expert; ++e) {
    ExpertWeights& ex = l.experts[static_cast<size_t>(e)];
    ex.w_gate = expert_matrix(b + "ffn_gate_exps.weight", c.n_embd, c.n_ff, c.n_expert, e);
    ex.w_up = expert_matrix(b + "ffn_up_exps.weight", c.n_embd, c.n_ff, c.n_expert, e);
    ex.w_down = expert_matrix(b + "ffn_down_exps.weight", c.n_ff, c.n_embd, c.n_expert, e);
  }
}

const float* GgufModel::f32_tensor(const std::string& name, std::initializer_list<int64_t> shape) const {
  const gguf::TensorInfo& t = file_.tensor(name);
  file_.expect_shape(t, shape);
  if (t.type != DType::f32) fail("tensor '" + name + "' is " + std::string(dtype_name(t.type)) + ", expected f32");
  return static_cast<const float*>(t.data);
}

// Qwen2-MoE's shared expert, weighted by sigmoid(ffn_gate_inp_shexp . x).
void GgufModel::bind_gated_shared_expert(const std::string& b, LayerWeights& l) const {
  const ModelConfig& c = config_;
  l.shared.w_gate = matrix(b + "ffn_gate_shexp.weight", c.n_embd, c.n_ff_shared);
  l.shared.w_up = matrix(b + "ffn_up_shexp.weight", c.n_embd, c.n_ff_shared);
  l.shared.w_down = matrix(b + "ffn_down_shexp.weight", c.n_ff_shared, c.n_embd);
  // [n_embd, 1] from today's converter, [n_embd] from older ones.
  const std::string gate = b + "ffn_gate_inp_shexp.weight";
  const gguf::TensorInfo* t = file_.find_tensor(gate);
  l.shared_gate = t != nullptr && t->shape.size() == 1
                      ? Weight{.data = vector(gate, c.n_embd), .type = DType::f32, .n_in = c.n_embd, .n_out = 1}
                      : matrix(gate, c.n_embd, 1);
}

const float* GgufModel::vector(const std::string& name, int64_t n, bool required) const {
  const gguf::TensorInfo* t = file_.find_tensor(name);
  if (t == nullptr) {
    if (required) fail("missing tensor '" + name + "'");
    return nullptr;
  }
  file_.expect_shape(*t, {n});
  if (t->type != DType::f32) fail("tensor '" + name + "' is " + std::string(dtype_name(t->type)) + ", expected f32");
  return static_cast<const float*>(t->data);
}

void GgufModel::bind(const ModelLoadOptions& options) {
  LoraSet lora = LoraSet::read(options.lora, /*hf_base=*/false, file_.get_string("general.architecture"), store_);
  lora_ = lora.empty() ? nullptr : &lora;
  try {
    bind_tensors(options);
  } catch (...) {
    lora_ = nullptr;
    throw;
  }
  lora_ = nullptr;
  lora.finish(weights_);
}

void GgufModel::bind_tensors(const ModelLoadOptions& options) {
  path_ = file_.path();
  const std::string arch = file_.get_string("general.architecture");
  const GgufArch& a = gguf_arch(file_.path(), arch);
  if (arch == "bert") {
    bind_bert(options);
    return;
  }
  if (arch == "modern-bert") {
    bind_modernbert(options);
    return;
  }
  if (arch == "nomic-bert") {
    bind_nomic_bert(options);
    return;
  }
  const std::string p = arch + ".";
  ModelConfig& c = config_;
  c.arch = a.runs_as.empty() ? arch : std::string(a.runs_as);
  c.name = file_.find_string("general.name").value_or("");
  c.n_embd = file_.get_u32(p + "embedding_length");
  c.n_layer = file_.get_u32(p + "block_count");
  // GLM-4.5's multi-token-prediction layers follow the model's; not run.
  const uint32_t n_nextn = file_.find_u32(p + "nextn_predict_layers").value_or(0);
  if (n_nextn >= c.n_layer) fail("nextn_predict_layers leaves no layers");
  c.n_layer -= n_nextn;
  c.n_head = file_.get_u32(p + "attention.head_count");
  if (a.name == "lfm2" || a.name == "lfm2moe") {
    read_lfm2_layers(p);
  } else if (a.name == "granitehybrid") {
    c.recurrent_layers = read_kv_head_counts(p);  // 0 kv heads: a Mamba-2 layer
  } else {
    c.n_head_kv = file_.find_u32(p + "attention.head_count_kv").value_or(static_cast<uint32_t>(c.n_head));
  }
  c.n_expert = file_.find_u32(p + "expert_count").value_or(0);
  c.n_expert_used = file_.find_u32(p + "expert_used_count").value_or(0);
  if (a.moe && c.n_expert == 0) fail("expert_count is missing or 0");
  if (c.n_expert > 0) {
    if (c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) fail("expert_used_count must be in 1..expert_count");
    // llama.cpp routes Mixtral and Qwen3-MoE by a softmax renormalized over
    // the top k, Qwen2-MoE by the top k's shares of the softmax over all.
    if (arch == "llama") c.arch = "mixtral";
    c.expert_weights_norm = arch != "qwen2moe";
  }
  const bool qwen_hybrid = arch == "qwen3next" || arch == "qwen35" || arch == "qwen35moe";
  if (arch == "qwen2moe" || arch == "qwen3next" || arch == "qwen35moe") {
    // The shared expert's width, else the dense one (as llama.cpp reads it).
    c.n_ff_shared = file_.find_u32(p + "expert_shared_feed_forward_length")
                        .value_or(file_.find_u32(p + "feed_forward_length").value_or(0));
    if (c.n_ff_shared <= 0) fail("expert_shared_feed_forward_length is missing or 0");
  }
  // An expert's width has a key of its own where the file also names a dense one.
  // (OLMoE's converter writes only feed_forward_length, its experts' width.)
  const std::optional<uint32_t> expert_ff = a.moe ? file_.find_u32(p + "expert_feed_forward_length") : std::nullopt;
  c.n_ff = expert_ff ? *expert_ff : file_.get_u32(p + "feed_forward_length");
  c.n_ctx_train = file_.get_u32(p + "context_length");
  // Embedding models (llama.cpp's converter writes what sentence-transformers
  // declares); vectors L2-normalized, as llama.cpp's embeddings are by default.
  // Rank pooling: a reranker, whose classifier is bound below.
  const std::optional<uint32_t> pooling_type = file_.find_u32(p + "pooling_type");
  if (pooling_type && *pooling_type != kRankPooling) {
    c.embedding.pooling = gguf_pooling(*pooling_type, file_.path());
    check_model_pooling(c.embedding.pooling, c.causal, file_.path());
  }
  const bool layer_norm = a.norms == GgufNorms::layer_before;
  const bool parallel = a.norms == GgufNorms::layer_parallel;
  c.norm_eps = file_.get_f32(p + (layer_norm || parallel ? "attention.layer_norm_epsilon"
                                                          : "attention.layer_norm_rms_epsilon"));
  if (c.n_embd <= 0 || c.n_layer <= 0 || c.n_head <= 0 || c.n_head_kv <= 0 || c.n_ff <= 0) {
    fail("hyperparameters must be positive");
  }
  if (c.n_head % c.n_head_kv != 0) fail("head_count is not a multiple of head_count_kv");
  if (a.name == "deepseek2") {
    read_deepseek2_attention(p);
  } else if (auto k = file_.find_u32(p + "attention.key_length")) {
    // Qwen3's heads need not tile the embedding (q_dim != n_embd).
    c.head_dim = *k;
    if (c.head_dim <= 0) fail("attention.key_length must be positive");
    if (auto v = file_.find_u32(p + "attention.value_length"); v && *v != *k) {
      throw Error(Errc::unsupported, file_.path() + ": attention.value_length " + std::to_string(*v) +
                                         " differs from key_length " + std::to_string(*k));
    }
  } else {
    if (c.n_embd % c.n_head != 0) fail("embedding_length is not a multiple of head_count");
    c.head_dim = c.n_embd / c.n_head;
  }
  c.n_rot = file_.find_u32(p + "rope.dimension_count").value_or(static_cast<uint32_t>(c.head_dim));
  if (c.n_rot <= 0 || c.n_rot > c.head_dim || c.n_rot % 2 != 0) fail("rope.dimension_count is out of range");
  c.rope_theta = file_.find_f32(p + "rope.freq_base").value_or(10000.0f);
  c.rope_layout = a.rope;  // see GgufArch
  if (auto type = file_.find_string(p + "rope.scaling.type"); type && *type == "linear") {
    const float factor = file_.get_f32(p + "rope.scaling.factor");
    if (!(factor > 0.0f)) fail("rope.scaling.factor must be positive");
    c.rope_freq_scale = 1.0f / factor;
  } else if (type && *type == "yarn") {
    read_yarn(p);
  } else if (type && *type != "none") {
    throw Error(Errc::unsupported,
                file_.path() + ": rope.scaling.type '" + *type + "' is not supported (linear and yarn are)");
  }
  if (a.gemma) read_gemma(p, a.name == "gemma2");
  if (a.fused) read_phi3(p);
  if (a.scales) read_granite(p);
  if (a.name == "gpt-oss") read_gpt_oss(p);
  if (a.name == "glm4moe") read_deepseek_routing(p, 2);
  if (a.name == "ernie4_5-moe") read_ernie_moe(p);
  if (a.name == "deepseek2") {
    read_deepseek_routing(p, 1);  // V2 files may not name their softmax
    read_deepseek2_score_scale(p);
  }
  if (parallel) {
    // Command-R: logits times logit_scale (ModelConfig divides). Command-R7B:
    // local layers (pattern 4 unless listed) that rope, global ones without.
    const float scale = file_.find_f32(p + "logit_scale").value_or(1.0f);
    if (!(scale > 0.0f) || !std::isfinite(scale)) fail("logit_scale must be positive");
    c.logit_scale = 1.0f / scale;
    if (a.name == "cohere2") {
      c.sliding_window = read_sliding_window(p);
      if (c.sliding_window <= 0) fail("attention.sliding_window is missing or 0");
      read_local_layers(p, 4);
      c.local_layers_share_rope = true;
      c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
      for (int64_t il = 0; il < c.n_layer; ++il) c.nope_layers[static_cast<size_t>(il)] = !c.is_local(il);
    }
  }
  if (a.name == "exaone4") {
    // Local layers where the file names a window (llama.cpp assumes window
    // 4096, every fourth layer global, for the 64-layer model when it does
    // not); they rope as the model does and the global ones not at all.
    c.sliding_window = read_sliding_window(p);
    if (c.sliding_window == 0 && c.n_layer == 64) c.sliding_window = 4096;
    if (c.sliding_window > 0) {
      read_local_layers(p, 4);
      c.local_layers_share_rope = true;
      c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
      for (int64_t il = 0; il < c.n_layer; ++il) c.nope_layers[static_cast<size_t>(il)] = !c.is_local(il);
    }
  }
  if (a.name == "olmo2") {
    c.qk_norm_whole = true;
    // OLMo 3: local layers (every fourth global unless the file lists them)
    // rope at freq_base_swa, else the global base, unscaled, as llama.cpp.
    c.sliding_window = read_sliding_window(p);
    if (c.sliding_window > 0) {
      read_local_layers(p, 4);
      c.rope_local_theta = file_.find_f32(p + "rope.freq_base_swa").value_or(c.rope_theta);
      if (!(c.rope_local_theta > 0.0f)) fail("rope.freq_base_swa must be positive");
    }
  }
  if (a.name == "lfm2" || a.name == "lfm2moe") {
    c.sliding_window = read_sliding_window(p);  // on every attention layer, when named
  }
  if (qwen_hybrid) read_qwen_hybrid(p);
  if (a.name == "granitehybrid") read_granite_hybrid(p);
  if (a.name == "hunyuan-dense") c.qk_norm_after_rope = true;  // its alpha already in rope.freq_base
  if (a.name == "minimax-m2") {
    // Whole-projection q/k norms; sigmoid scores chosen with exp_probs_b,
    // renormalized (llama.cpp always does for this architecture).
    c.qk_norm_whole = true;
    read_deepseek_routing(p, 2);
    c.expert_weights_norm = file_.find_bool(p + "expert_weights_norm").value_or(true);
  }
  if (a.name == "olmoe") {
    // q/k norms over the whole projections; the top k's shares of the
    // softmax over all experts, not renormalized (llama.cpp's olmoe).
    c.qk_norm_whole = true;
    c.expert_weights_norm = file_.find_bool(p + "expert_weights_norm").value_or(false);
  }
  if (a.name == "mistral3") {
    // Ministral 3's attention temperature, stepping every original context
    // (llama.cpp's n_ctx_orig_yarn) as transformers steps it.
    c.attn_temp_beta = file_.find_f32(p + "attention.temperature_scale").value_or(0.0f);
    if (!std::isfinite(c.attn_temp_beta)) fail("attention.temperature_scale must be finite");
    if (c.attn_temp_beta != 0.0f) {
      c.attn_temp_floor = file_.find_u32(p + "rope.scaling.original_context_length").value_or(0);
      if (c.attn_temp_floor <= 0) fail("attention.temperature_scale needs rope.scaling.original_context_length");
    }
  }
  if (a.name == "lfm2moe") {
    // Sigmoid scores chosen with exp_probs_b, always renormalized by
    // llama.cpp (over the sum + 1e-6, as transformers), scaled when the file says.
    read_deepseek_routing(p, 2);
    c.expert_weights_norm = file_.find_bool(p + "expert_weights_norm").value_or(true);
    c.expert_weights_norm_eps = 1e-6f;
  }
  if (a.name == "smollm3") {
    // llama.cpp's fixed step: every fourth layer has no RoPE.
    c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
    for (int64_t il = 0; il < c.n_layer; ++il) c.nope_layers[static_cast<size_t>(il)] = (il + 1) % 4 == 0;
  }

  const gguf::TensorInfo& embd = file_.tensor("token_embd.weight");
  if (embd.shape.size() != 2) fail("tensor 'token_embd.weight' must have 2 dimensions");
  c.n_vocab = embd.shape[1];
  if (auto v = file_.find_u32(p + "vocab_size"); v && static_cast<int64_t>(*v) != c.n_vocab) {
    fail("vocab_size " + std::to_string(*v) + " does not match token_embd.weight's " + std::to_string(c.n_vocab) +
         " rows");
  }
  if (const float* f = vector("rope_freqs.weight", c.n_rot / 2, /*required=*/false)) {
    c.rope_freq_factors.assign(f, f + c.n_rot / 2);
  }

  ModelWeights& w = weights_;
  w.tok_embd = matrix("token_embd.weight", c.n_embd, c.n_vocab);
  // LFM2's final norm is written as token_embd_norm (the checkpoint's embedding_norm).
  const bool lfm2 = a.name == "lfm2" || a.name == "lfm2moe";
  w.output_norm = vector(lfm2 ? "token_embd_norm.weight" : "output_norm.weight", c.n_embd);
  if (layer_norm) w.output_norm_b = vector("output_norm.bias", c.n_embd);
  c.tied_output = file_.find_tensor("output.weight") == nullptr;
  w.output = c.tied_output ? w.tok_embd : matrix("output.weight", c.n_embd, c.n_vocab);
  // Every layer has tensors of its own: a block_count beyond the tensor
  // table is refused before a list of that many layers is made.
  if (c.n_layer > static_cast<int64_t>(file_.tensors().size())) {
    fail("block_count " + std::to_string(c.n_layer) + " is more than the file's " +
         std::to_string(file_.tensors().size()) + " tensors");
  }
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    const bool post_norm_only = a.norms == GgufNorms::rms_after;
    if (!post_norm_only) l.attn_norm = vector(b + "attn_norm.weight", c.n_embd);
    if (parallel) {
      if (file_.find_tensor(b + "attn_q_norm.weight") != nullptr) {
        throw Error(Errc::unsupported, file_.path() + ": per-head q/k LayerNorms (Command R+) are not supported");
      }
      l.wq = matrix(b + "attn_q.weight", c.n_embd, c.q_dim());
      l.wk = matrix(b + "attn_k.weight", c.n_embd, c.kv_dim());
      l.wv = matrix(b + "attn_v.weight", c.n_embd, c.kv_dim());
      l.wo = matrix(b + "attn_output.weight", c.q_dim(), c.n_embd);
      l.w_gate = matrix(b + "ffn_gate.weight", c.n_embd, c.n_ff);
      l.w_up = matrix(b + "ffn_up.weight", c.n_embd, c.n_ff);
      l.w_down = matrix(b + "ffn_down.weight", c.n_ff, c.n_embd);
      continue;
    }
    if (lfm2) {
      bind_lfm2_layer(b, il, l);
      continue;
    }
    if (qwen_hybrid) {
      bind_qwen_hybrid_layer(b, il, l);
      continue;
    }
    if (a.name == "granitehybrid") {
      bind_granite_hybrid_layer(b, il, l);
      continue;
    }
    if (a.name == "deepseek2") {
      bind_deepseek2_attention(b, l);
      l.ffn_norm = vector(b + "ffn_norm.weight", c.n_embd);
      bind_deepseek_layer_ffn(b, il, l);
      continue;
    }
    // GLM-4 files may fuse q, k and v as llama.cpp lets them (attn_qkv).
    if (a.fused || (a.name == "glm4" && file_.find_tensor(b + "attn_qkv.weight") != nullptr)) {
      const Weight qkv = matrix(b + "attn_qkv.weight", c.n_embd, c.q_dim() + 2 * c.kv_dim());
      l.wq = weight_rows(qkv, 0, c.q_dim());
      l.wk = weight_rows(qkv, c.q_dim(), c.kv_dim());
      l.wv = weight_rows(qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
    } else {
      l.wq = matrix(b + "attn_q.weight", c.n_embd, c.q_dim());
      l.wk = matrix(b + "attn_k.weight", c.n_embd, c.kv_dim());
      l.wv = matrix(b + "attn_v.weight", c.n_embd, c.kv_dim());
    }
    l.wo = matrix(b + "attn_output.weight", c.q_dim(), c.n_embd);
    if (const float* qkv_b = vector(b + "attn_qkv.bias", c.q_dim() + 2 * c.kv_dim(), false)) {
      l.bq = qkv_b;
      l.bk = qkv_b + c.q_dim();
      l.bv = qkv_b + c.q_dim() + c.kv_dim();
    } else {
      l.bq = vector(b + "attn_q.bias", c.q_dim(), false);
      l.bk = vector(b + "attn_k.bias", c.kv_dim(), false);
      l.bv = vector(b + "attn_v.bias", c.kv_dim(), false);
    }
    if (a.name == "glm4moe" && file_.find_tensor(b + "attn_q_norm.weight") != nullptr) {
      l.q_norm = vector(b + "attn_q_norm.weight", c.head_dim);  // GLM-4.5's use_qk_norm
      l.k_norm = vector(b + "attn_k_norm.weight", c.head_dim);
    }
    if (a.qk_norm || c.qk_norm_whole) {
      l.q_norm = vector(b + "attn_q_norm.weight", c.qk_norm_whole ? c.q_dim() : c.head_dim);
      l.k_norm = vector(b + "attn_k_norm.weight", c.qk_norm_whole ? c.kv_dim() : c.head_dim);
    }
    if (a.name == "gpt-oss") {
      bind_gpt_oss_layer(b, l);
      continue;
    }
    if (a.name == "glm4moe") {
      bind_glm4moe_layer(b, il, l);
      continue;
    }
    if (a.name == "apertus") {  // no gate: down(xIELU(up(x)))
      l.ffn_norm = vector(b + "ffn_norm.weight", c.n_embd);
      l.w_up = matrix(b + "ffn_up.weight", c.n_embd, c.n_ff);
      l.w_down = matrix(b + "ffn_down.weight", c.n_ff, c.n_embd);
      continue;
    }
    if (a.name == "ernie4_5-moe" || a.name == "minimax-m2") {
      l.ffn_norm = vector(b + "ffn_norm.weight", c.n_embd);
      bind_deepseek_layer_ffn(b, il, l);
      continue;
    }
    // Seed-OSS's converter names the norm before the FFN post_attention_norm.
    const char* ffn_norm = a.name == "seed_oss" ? "post_attention_norm.weight" : "ffn_norm.weight";
    if (!post_norm_only) l.ffn_norm = vector(b + ffn_norm, c.n_embd);
    if (a.gemma || post_norm_only || a.norms == GgufNorms::rms_sandwich) {
      l.attn_post_norm = vector(b + "post_attention_norm.weight", c.n_embd);
      l.ffn_post_norm = vector(b + "post_ffw_norm.weight", c.n_embd);
    }
    if (c.n_expert > 0) {
      bind_experts(b, l);
      if (c.n_ff_shared > 0) bind_gated_shared_expert(b, l);
      continue;
    }
    if (layer_norm) {
      l.attn_norm_b = vector(b + "attn_norm.bias", c.n_embd);
      l.bo = vector(b + "attn_output.bias", c.n_embd);
      l.ffn_norm_b = vector(b + "ffn_norm.bias", c.n_embd);
      l.w_up = matrix(b + "ffn_up.weight", c.n_embd, c.n_ff);  // no gate: GELU(up x + b) -> down
      l.b_up = vector(b + "ffn_up.bias", c.n_ff);
      l.w_down = matrix(b + "ffn_down.weight", c.n_ff, c.n_embd);
      l.b_down = vector(b + "ffn_down.bias", c.n_embd);
      continue;
    }
    if (a.fused || a.name == "glm4") {  // GLM-4's ffn_up is gate then up, as Phi-3's
      const Weight gate_up = matrix(b + "ffn_up.weight", c.n_embd, 2 * c.n_ff);
      l.w_gate = weight_rows(gate_up, 0, c.n_ff);
      l.w_up = weight_rows(gate_up, c.n_ff, c.n_ff);
    } else {
      l.w_gate = matrix(b + "ffn_gate.weight", c.n_embd, c.n_ff);
      l.w_up = matrix(b + "ffn_up.weight", c.n_embd, c.n_ff);
    }
    l.w_down = matrix(b + "ffn_down.weight", c.n_ff, c.n_embd);
  }

  if (a.name == "apertus") read_xielu();
  if (pooling_type && *pooling_type == kRankPooling) bind_causal_classifier(p);
  if (!options.classifier_from_token.empty()) {
    const std::vector<std::string>* tokens = file_.find_string_array("tokenizer.ggml.tokens");
    std::vector<int32_t> ids;
    for (const std::string& t : options.classifier_from_token) {
      int32_t id = -1;
      for (size_t i = 0; tokens != nullptr && i < tokens->size() && id < 0; ++i) {
        if ((*tokens)[i] == t) id = static_cast<int32_t>(i);
      }
      ids.push_back(id);
    }
    bind_token_classifier(options.classifier_from_token, ids, file_.path(), c, w, store_);
  }
  apply_rerank_template(options, file_.path(), c);

  // What one decode step streams: every matrix once (the embedding lookup
  // reads one row, so it counts only when it doubles as the output head).
  weight_bytes_ = 0;
  for (const gguf::TensorInfo& t : file_.tensors()) {
    if (t.name != "token_embd.weight" || c.tied_output) weight_bytes_ += t.n_bytes;
  }
  // A mixture of experts reads only the routed experts a step.
  if (c.n_expert > 0) weight_bytes_ = decode_weight_bytes(w, c);

  select_longrope(c, options.context_length);
  if (options.quantize) {
    quantize_weights(w, c, *options.quantize, store_, file_.path());
    weight_bytes_ = decode_weight_bytes(w, c);
  }

  vocab_ = vocab_from_gguf(file_);
  chat_template_ = file_.find_string("tokenizer.chat_template").value_or("");
}

}  // namespace gguf_load

std::shared_ptr<const Model> load_gguf_model(const std::string& path, const ModelLoadOptions& options) {
  auto model = std::make_shared<gguf_load::GgufModel>(gguf::GgufFile::open(path));
  model->bind(options);
  return model;
}

}  // namespace troupe
