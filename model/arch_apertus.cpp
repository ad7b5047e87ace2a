// Apertus (ApertusForCausalLM, and GGUF "apertus" files: Apertus-8B and
// 70B): the Llama layer with per-head q/k RMSNorms before RoPE, its norms
// named attention_layernorm and feedforward_layernorm, and an MLP without a
// gate: down(xIELU(up(x))). xIELU's trained parameters per layer
// (mlp.act_fn.alpha_p, alpha_n, beta, eps) become the effective ones at load:
// alpha_p' = softplus(alpha_p), alpha_n' = beta + softplus(alpha_n).
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

// A scalar stored as a 0-D or one-element tensor, in f32.
float scalar(HfWeights& src, const std::string& name) {
  const safetensors::TensorInfo& t = src.expect_either(name, {}, {1});
  return *store_f32(src.store(), *t.type, t.data, 1);
}

float softplus(float x) { return static_cast<float>(std::log1p(std::exp(static_cast<double>(x)))); }

void load_apertus(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "apertus";
  read_decoder_sizes(cfg, c);
  const std::string act = cfg.get_string("hidden_act", "xielu");
  if (act != "xielu") cfg.fail(Errc::unsupported, "hidden_act '" + act + "' is not supported; supported: xielu");
  if (cfg.get_bool("mlp_bias", false)) cfg.fail(Errc::unsupported, "mlp_bias is not supported");
  read_rope_config(cfg, c);
  check_config(cfg, c);
  const bool bias = cfg.get_bool("attention_bias", false);
  bind_llama_weights(src, c,
                     {.qkv_bias = bias,
                      .o_bias = bias,
                      .qk_norm = true,
                      .dense_ffn = false,
                      .attn_norm = "attention_layernorm",
                      .ffn_norm = "feedforward_layernorm"},
                     w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.w_up = src.matrix(p + "mlp.up_proj.weight", c.n_embd, c.n_ff);
    l.w_down = src.matrix(p + "mlp.down_proj.weight", c.n_ff, c.n_embd);
    const std::string a = p + "mlp.act_fn.";
    l.xielu.beta = scalar(src, a + "beta");
    l.xielu.eps = scalar(src, a + "eps");
    l.xielu.alpha_p = softplus(scalar(src, a + "alpha_p"));
    l.xielu.alpha_n = l.xielu.beta + softplus(scalar(src, a + "alpha_n"));
  }
}

void apertus_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // applies q_norm, k_norm
  layers::xielu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::apertus{.name = "apertus",
                                 .hf_class = "ApertusForCausalLM",
                                 .load_hf = load_apertus,
                                 .embed = layers::embed_tokens,
                                 .layer = apertus_layer,
                                 .output_norm = arch::rms_output_norm};

}  // namespace troupe
