// StarCoder2 (Starcoder2ForCausalLM, and GGUF "starcoder2" files: StarCoder2
// 3B-15B): pre-LayerNorm blocks with biases (use_bias) on every projection
// and norm, grouped-query attention with RoPE and an optional sliding window,
// a GELU (tanh) MLP (c_fc, c_proj) and a final LayerNorm.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void load_starcoder2(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "starcoder2";
  // The sizes as Llama's, with the LayerNorms' epsilon in norm_epsilon.
  nlohmann::json sizes = cfg.json();
  sizes["rms_norm_eps"] = cfg.get_float("norm_epsilon", 1e-5);
  read_decoder_sizes(HfConfig(std::move(sizes), cfg.path()), c);
  const std::string act = cfg.get_string("hidden_act", "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh" && act != "gelu_new") {
    cfg.fail(Errc::unsupported, "hidden_act '" + act + "' is not supported; supported: gelu_pytorch_tanh");
  }
  read_rope_config(cfg, c);
  check_config(cfg, c);
  const int64_t window = cfg.get_int("sliding_window", 0);  // null: full attention
  if (window < 0 || window > INT32_MAX) cfg.fail(Errc::bad_format, "sliding_window is out of range");
  c.sliding_window = static_cast<int32_t>(window);
  const bool bias = cfg.get_bool("use_bias", true);
  auto bias_of = [&](const std::string& name, int64_t n) { return bias ? src.vector(name, n) : nullptr; };
  bind_model_ends(src, c, w);
  w.output_norm_b = src.vector("model.norm.bias", c.n_embd);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = src.vector(p + "input_layernorm.weight", c.n_embd);
    l.attn_norm_b = src.vector(p + "input_layernorm.bias", c.n_embd);
    l.wq = src.matrix(p + "self_attn.q_proj.weight", c.n_embd, c.q_dim());
    l.wk = src.matrix(p + "self_attn.k_proj.weight", c.n_embd, c.kv_dim());
    l.wv = src.matrix(p + "self_attn.v_proj.weight", c.n_embd, c.kv_dim());
    l.wo = src.matrix(p + "self_attn.o_proj.weight", c.q_dim(), c.n_embd);
    l.bq = bias_of(p + "self_attn.q_proj.bias", c.q_dim());
    l.bk = bias_of(p + "self_attn.k_proj.bias", c.kv_dim());
    l.bv = bias_of(p + "self_attn.v_proj.bias", c.kv_dim());
    l.bo = bias_of(p + "self_attn.o_proj.bias", c.n_embd);
    l.ffn_norm = src.vector(p + "post_attention_layernorm.weight", c.n_embd);
    l.ffn_norm_b = src.vector(p + "post_attention_layernorm.bias", c.n_embd);
    l.w_up = src.matrix(p + "mlp.c_fc.weight", c.n_embd, c.n_ff);
    l.b_up = bias_of(p + "mlp.c_fc.bias", c.n_ff);
    l.w_down = src.matrix(p + "mlp.c_proj.weight", c.n_ff, c.n_embd);
    l.b_down = bias_of(p + "mlp.c_proj.bias", c.n_embd);
  }
}

void starcoder2_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::layer, /*rope=*/true);  // the window travels in config
  layers::gelu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::starcoder2{.name = "starcoder2",
                                    .hf_class = "Starcoder2ForCausalLM",
                                    .load_hf = load_starcoder2,
                                    .embed = layers::embed_tokens,
                                    .layer = starcoder2_layer,
                                    .output_norm = arch::layer_output_norm};

}  // namespace troupe
