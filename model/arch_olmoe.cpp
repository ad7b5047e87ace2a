// OLMoE (OlmoeForCausalLM, and GGUF "olmoe" files: OLMoE-1B-7B): the Llama
// pre-norm layer with OLMo's RMSNorms over each token's whole q and k
// projections (ModelConfig::qk_norm_whole) and, in every layer, a mixture of
// SwiGLU experts of intermediate_size routed by a softmax over all experts,
// the top k's shares renormalized only with norm_topk_prob (off in the
// published models). clip_qkv is refused: no published model sets it.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void load_olmoe(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "olmoe";
  read_llama_config(cfg, c);
  c.n_expert = cfg.get_int("num_experts");
  c.n_expert_used = cfg.get_int("num_experts_per_tok");
  if (c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
    cfg.fail(Errc::bad_format, "num_experts_per_tok must be in 1..num_experts");
  }
  c.expert_weights_norm = cfg.get_bool("norm_topk_prob", false);
  c.qk_norm_whole = true;
  if (cfg.has("clip_qkv") && !cfg.json()["clip_qkv"].is_null()) {
    cfg.fail(Errc::unsupported, "clip_qkv is not supported");
  }
  check_config(cfg, c);
  const bool bias = cfg.get_bool("attention_bias", false);
  bind_llama_weights(src, c, {.qkv_bias = bias, .o_bias = bias, .dense_ffn = false}, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".self_attn.";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.q_norm = src.vector(p + "q_norm.weight", c.q_dim());
    l.k_norm = src.vector(p + "k_norm.weight", c.kv_dim());
  }
  bind_experts(src, c, {.block = "mlp.", .gate = "gate_proj", .up = "up_proj", .down = "down_proj"}, w);
}

void olmoe_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // the whole-projection q/k norms
  layers::moe_block(ctx, il, x);
}

}  // namespace

const Architecture arch::olmoe{.name = "olmoe",
                               .hf_class = "OlmoeForCausalLM",
                               .load_hf = load_olmoe,
                               .embed = layers::embed_tokens,
                               .layer = olmoe_layer,
                               .output_norm = arch::rms_output_norm};

}  // namespace troupe
