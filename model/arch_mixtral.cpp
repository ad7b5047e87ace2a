// Mixtral (MixtralForCausalLM): the Llama attention, then a mixture of
// SwiGLU experts; each token goes to the num_experts_per_tok experts with the
// largest router logits, weighted by a softmax over those logits.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void load_mixtral(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "mixtral";
  read_llama_config(cfg, c);
  c.n_expert = cfg.get_int("num_local_experts");
  c.n_expert_used = cfg.get_int("num_experts_per_tok");
  if (c.n_expert <= 0 || c.n_expert_used <= 0) {
    cfg.fail(Errc::bad_format, "num_local_experts and num_experts_per_tok must be positive");
  }
  check_config(cfg, c);
  const int64_t window = cfg.get_int("sliding_window", 0);
  if (window < 0 || window > INT32_MAX) cfg.fail(Errc::bad_format, "sliding_window " + std::to_string(window) + " is out of range");
  c.sliding_window = static_cast<int32_t>(window);

  bind_llama_weights(src, c, {.dense_ffn = false}, w);
  // The checkpoint layout published Mixtral models use (and transformers
  // writes): block_sparse_moe.gate, experts.E.w1 (gate), w3 (up), w2 (down).
  bind_experts(src, c, {.block = "block_sparse_moe.", .gate = "w1", .up = "w3", .down = "w2"}, w);
}

void mixtral_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);
  layers::moe_block(ctx, il, x);
}

}  // namespace

const Architecture arch::mixtral{.name = "mixtral",
                                 .hf_class = "MixtralForCausalLM",
                                 .load_hf = load_mixtral,
                                 .embed = layers::embed_tokens,
                                 .layer = mixtral_layer,
                                 .output_norm = arch::rms_output_norm};

}  // namespace troupe
