// GLM-4 (Glm4ForCausalLM, and GGUF "glm4" files: GLM-4-9B-0414, GLM-4-32B-0414,
// GLM-Z1): the Llama layer with Gemma's sandwich of plain RMSNorms (x +=
// post_norm(f(pre_norm(x))) around attention and around the MLP), biases on
// q, k and v, gate and up stored as one gate_up_proj, and RoPE on the first
// half of each head in adjacent pairs (GLM's interleaved rotate_half, which
// is llama.cpp's NORM layout: no row permutation in either format).
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"
#include "model/model_loaders.hpp"

namespace troupe {
namespace {

void load_glm4(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "glm4";
  read_llama_config(cfg, c);  // partial_rotary_factor (0.5 in every published config) sets n_rot
  check_config(cfg, c);
  c.rope_layout = kernels::RopeLayout::normal;
  const bool qkv_bias = cfg.get_bool("attention_bias", true);  // Glm4Config's default
  bind_llama_weights(src, c, {.qkv_bias = qkv_bias, .dense_ffn = false}, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_post_norm = src.vector(p + "post_self_attn_layernorm.weight", c.n_embd);
    l.ffn_post_norm = src.vector(p + "post_mlp_layernorm.weight", c.n_embd);
    // [2 n_ff, n_embd]: rows of gate, then up (Phi-3's MLP).
    const Weight gate_up = src.matrix(p + "mlp.gate_up_proj.weight", c.n_embd, 2 * c.n_ff);
    l.w_gate = weight_rows(gate_up, 0, c.n_ff);
    l.w_up = weight_rows(gate_up, c.n_ff, c.n_ff);
    l.w_down = src.matrix(p + "mlp.down_proj.weight", c.n_ff, c.n_embd);
  }
}

void glm4_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::sandwich_attention_block(ctx, il, kv, x);  // adds bq, bk, bv
  layers::sandwich_swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::glm4{.name = "glm4",
                              .hf_class = "Glm4ForCausalLM",
                              .load_hf = load_glm4,
                              .embed = layers::embed_tokens,
                              .layer = glm4_layer,
                              .output_norm = arch::rms_output_norm};

}  // namespace troupe
