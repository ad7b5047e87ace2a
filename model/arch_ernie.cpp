// ERNIE 4.5 (Ernie4_5ForCausalLM: ERNIE-4.5-0.3B; Ernie4_5_MoeForCausalLM:
// ERNIE-4.5-21B-A3B, 300B-A47B; GGUF "ernie4_5" and "ernie4_5-moe"): the
// Llama layer with RoPE in adjacent pairs (GLM's interleaved rotation, no
// permutation in either format) and, in the MoE models, experts on every
// moe_layer_interval-th layer from moe_layer_start_index to
// moe_layer_end_index (dense layers elsewhere), routed by a softmax whose
// top k are chosen by score + e_score_correction_bias and renormalized,
// beside moe_num_shared_experts ungated shared experts.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void read_dense(const HfConfig& cfg, ModelConfig& c, const char* arch) {
  c.arch = arch;
  read_llama_config(cfg, c);
  c.rope_layout = kernels::RopeLayout::normal;
  if (cfg.get_bool("use_bias", false)) cfg.fail(Errc::unsupported, "use_bias is not supported");
}

void load_dense(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  read_dense(cfg, c, "ernie4_5");
  check_config(cfg, c);
  bind_llama_weights(src, c, {}, w);
}

// The spelling the published configs use (moe_num_experts, moe_k) or the
// one transformers 5 writes (num_experts, num_experts_per_tok).
int64_t int_either(const HfConfig& cfg, const char* a, const char* b) {
  return cfg.has(a) ? cfg.get_int(a) : cfg.get_int(b);
}

void load_moe(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  read_dense(cfg, c, "ernie4_5-moe");
  c.n_ff_dense = c.n_ff;
  c.n_ff = cfg.get_int("moe_intermediate_size");
  c.n_expert = int_either(cfg, "moe_num_experts", "num_experts");
  c.n_expert_used = int_either(cfg, "moe_k", "num_experts_per_tok");
  if (c.n_ff <= 0 || c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
    cfg.fail(Errc::bad_format, "moe_intermediate_size, the expert count and moe_k (at most the experts) must be "
                               "positive");
  }
  c.expert_router = ModelConfig::ExpertRouter::deepseek_softmax;
  c.expert_weights_norm = true;
  const int64_t n_shared = cfg.get_int("moe_num_shared_experts", 0);
  if (n_shared < 0) cfg.fail(Errc::bad_format, "moe_num_shared_experts must not be negative");
  c.n_ff_shared = n_shared * c.n_ff;
  const int64_t start = cfg.get_int("moe_layer_start_index", 1);
  int64_t end = cfg.get_int("moe_layer_end_index", -1);
  if (end == -1) end = c.n_layer - 1;
  const int64_t interval = cfg.get_int("moe_layer_interval", 1);
  if (start < 0 || interval <= 0) cfg.fail(Errc::bad_format, "moe_layer_start_index and moe_layer_interval are out of range");
  check_config(cfg, c);
  bind_llama_weights(src, c, {.dense_ffn = false}, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".mlp.";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    if ((il + 1) % interval != 0 || il < start || il > end) {
      l.w_gate = src.matrix(p + "gate_proj.weight", c.n_embd, c.n_ff_dense);
      l.w_up = src.matrix(p + "up_proj.weight", c.n_embd, c.n_ff_dense);
      l.w_down = src.matrix(p + "down_proj.weight", c.n_ff_dense, c.n_embd);
      continue;
    }
    l.ffn_router = src.matrix(p + "gate.weight", c.n_embd, c.n_expert);
    // Stored [1, n_expert].
    l.expert_score_bias = src.vector_rows(p + "moe_statics.e_score_correction_bias", 1, c.n_expert);
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

void layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);
  if (ctx.weights.layers[static_cast<size_t>(il)].experts.empty()) {
    layers::swiglu_block(ctx, il, x);
  } else {
    layers::moe_block(ctx, il, x);  // and the shared experts
  }
}

}  // namespace

const Architecture arch::ernie4_5{.name = "ernie4_5",
                                  .hf_class = "Ernie4_5ForCausalLM",
                                  .load_hf = load_dense,
                                  .embed = layers::embed_tokens,
                                  .layer = layer,
                                  .output_norm = arch::rms_output_norm};

const Architecture arch::ernie4_5_moe{.name = "ernie4_5-moe",
                                      .hf_class = "Ernie4_5_MoeForCausalLM",
                                      .load_hf = load_moe,
                                      .embed = layers::embed_tokens,
                                      .layer = layer,
                                      .output_norm = arch::rms_output_norm};

}  // namespace troupe
