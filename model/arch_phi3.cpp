// Phi-3 (Phi3ForCausalLM, and GGUF "phi3" files: Phi-3-mini/medium, Phi-4):
// the Llama layer with Q, K and V in one projection (qkv_proj) and the
// FFN's gate and up in one (gate_up_proj, gate first), an optional sliding
// window, and RoPE over the first partial_rotary_factor of each head.
// LongRoPE (Phi-3.5, Phi-4-mini, the 128k variants) is refused by the RoPE
// reader rather than run at the wrong frequencies.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"
#include "model/model_loaders.hpp"

namespace troupe {
namespace {

void load(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "phi3";
  read_llama_config(cfg, c);
  check_config(cfg, c);
  const int64_t window = cfg.get_int("sliding_window", 0);  // null: full attention
  if (window < 0 || window > INT32_MAX) cfg.fail(Errc::bad_format, "sliding_window is out of range");
  c.sliding_window = static_cast<int32_t>(window);

  w.tok_embd = src.matrix("model.embed_tokens.weight", c.n_embd, c.n_vocab);
  w.output_norm = src.vector("model.norm.weight", c.n_embd);
  w.output = c.tied_output ? w.tok_embd : src.matrix("lm_head.weight", c.n_embd, c.n_vocab);
  w.layers.assign(static_cast<size_t>(c.n_layer), LayerWeights{});
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = src.vector(p + "input_layernorm.weight", c.n_embd);
    // [q_dim + 2 kv_dim, n_embd]: rows of q, then k, then v.
    const Weight qkv = src.matrix(p + "self_attn.qkv_proj.weight", c.n_embd, c.q_dim() + 2 * c.kv_dim());
    l.wq = weight_rows(qkv, 0, c.q_dim());
    l.wk = weight_rows(qkv, c.q_dim(), c.kv_dim());
    l.wv = weight_rows(qkv, c.q_dim() + c.kv_dim(), c.kv_dim());
    l.wo = src.matrix(p + "self_attn.o_proj.weight", c.q_dim(), c.n_embd);
    l.ffn_norm = src.vector(p + "post_attention_layernorm.weight", c.n_embd);
    // [2 n_ff, n_embd]: rows of gate, then up.
    const Weight gate_up = src.matrix(p + "mlp.gate_up_proj.weight", c.n_embd, 2 * c.n_ff);
    l.w_gate = weight_rows(gate_up, 0, c.n_ff);
    l.w_up = weight_rows(gate_up, c.n_ff, c.n_ff);
    l.w_down = src.matrix(p + "mlp.down_proj.weight", c.n_ff, c.n_embd);
  }
}

void layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // the window travels in config
  layers::swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::phi3{.name = "phi3",
                              .hf_class = "Phi3ForCausalLM",
                              .load_hf = load,
                              .embed = layers::embed_tokens,
                              .layer = layer,
                              .output_norm = arch::rms_output_norm};

}  // namespace troupe
