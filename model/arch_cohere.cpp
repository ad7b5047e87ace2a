// Command-R (CohereForCausalLM, and GGUF "command-r" files: Command-R,
// Aya 23, Aya Expanse) and Command-R7B (Cohere2ForCausalLM, GGUF "cohere2":
// Command R7B, Command A): LayerNorms without bias, attention and the
// SwiGLU MLP side by side on one normed input (x += attn(n) + mlp(n)), RoPE
// in adjacent pairs (Cohere's rotate_half; no permutation in either
// format), tied embeddings and logits times logit_scale. Command-R7B's
// local layers (a sliding window, three of every four) rope and its global
// ones attend without RoPE. use_qk_norm (Command R+'s per-head LayerNorms)
// is refused.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void load_cohere(const HfConfig& file_cfg, HfWeights& src, ModelConfig& c, ModelWeights& w, bool v2) {
  c.arch = v2 ? "cohere2" : "command-r";
  // The Llama reader wants rms_norm_eps; Cohere's LayerNorms name theirs.
  nlohmann::json j = file_cfg.json();
  j["rms_norm_eps"] = j.contains("layer_norm_eps") ? j["layer_norm_eps"] : nlohmann::json(1e-5);
  const HfConfig cfg(std::move(j), file_cfg.path());
  read_llama_config(cfg, c);
  c.rope_layout = kernels::RopeLayout::normal;
  c.tied_output = cfg.get_bool("tie_word_embeddings", true);
  if (cfg.get_bool("use_qk_norm", false)) cfg.fail(Errc::unsupported, "use_qk_norm is not supported");
  if (cfg.get_bool("attention_bias", false)) cfg.fail(Errc::unsupported, "attention_bias is not supported");
  // Older Command-R7B configs say how much of a head ropes; all of it in
  // every published one.
  if (cfg.get_float("rotary_pct", 1.0) != 1.0) cfg.fail(Errc::unsupported, "rotary_pct other than 1 is not supported");
  const double scale = cfg.get_float("logit_scale", 1.0);
  if (!(scale > 0.0)) cfg.fail(Errc::bad_format, "logit_scale must be positive");
  c.logit_scale = static_cast<float>(1.0 / scale);  // ModelConfig divides
  if (v2) {
    read_layer_kinds(cfg, c, 4);
    c.local_layers_share_rope = true;
    c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
    for (int64_t il = 0; il < c.n_layer; ++il) c.nope_layers[static_cast<size_t>(il)] = !c.is_local(il);
  }
  check_config(cfg, c);
  bind_model_ends(src, c, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = src.vector(p + "input_layernorm.weight", c.n_embd);
    l.wq = src.matrix(p + "self_attn.q_proj.weight", c.n_embd, c.q_dim());
    l.wk = src.matrix(p + "self_attn.k_proj.weight", c.n_embd, c.kv_dim());
    l.wv = src.matrix(p + "self_attn.v_proj.weight", c.n_embd, c.kv_dim());
    l.wo = src.matrix(p + "self_attn.o_proj.weight", c.q_dim(), c.n_embd);
    l.w_gate = src.matrix(p + "mlp.gate_proj.weight", c.n_embd, c.n_ff);
    l.w_up = src.matrix(p + "mlp.up_proj.weight", c.n_embd, c.n_ff);
    l.w_down = src.matrix(p + "mlp.down_proj.weight", c.n_ff, c.n_embd);
  }
}

void cohere_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::parallel_block(ctx, il, kv, x);
}

}  // namespace

const Architecture arch::command_r{.name = "command-r",
                                   .hf_class = "CohereForCausalLM",
                                   .load_hf = [](const HfConfig& cfg, HfWeights& src, ModelConfig& c,
                                                 ModelWeights& w) { load_cohere(cfg, src, c, w, false); },
                                   .embed = layers::embed_tokens,
                                   .layer = cohere_layer,
                                   .output_norm = layers::output_layer_norm};  // and the logits' scale

const Architecture arch::cohere2{.name = "cohere2",
                                 .hf_class = "Cohere2ForCausalLM",
                                 .load_hf = [](const HfConfig& cfg, HfWeights& src, ModelConfig& c,
                                               ModelWeights& w) { load_cohere(cfg, src, c, w, true); },
                                 .embed = layers::embed_tokens,
                                 .layer = cohere_layer,
                                 .output_norm = layers::output_layer_norm};  // and the logits' scale

}  // namespace troupe
