// GPT-2 (GPT2LMHeadModel): learned position embeddings, pre-LayerNorm blocks
// with biases everywhere, multi-head attention without RoPE, a GELU (tanh)
// MLP, a final LayerNorm and the output head tied to the token embedding.
// Its Conv1D weights are stored [in, out]: transposed at load, and the fused
// c_attn is split into Q, K and V rows.
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"
#include "model/model_loaders.hpp"

namespace troupe {
namespace {

void read_gpt2_config(const HfConfig& cfg, ModelConfig& c) {
  c.arch = "gpt2";
  read_gpt2_sizes(cfg, c);
  c.n_ctx_train = cfg.get_int("n_positions");
  c.n_rot = 0;  // positions are learned, not rotated
  c.tied_output = cfg.get_bool("tie_word_embeddings", true);
  // gelu_new and gelu_pytorch_tanh are the same tanh approximation.
  const std::string act = cfg.get_string("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
    cfg.fail(Errc::unsupported, "activation_function '" + act + "' is not supported; supported: gelu_new, "
                                "gelu_pytorch_tanh");
  }
  if (!cfg.get_bool("scale_attn_weights", true) || cfg.get_bool("scale_attn_by_inverse_layer_idx", false)) {
    cfg.fail(Errc::unsupported, "only the 1/sqrt(head_dim) attention scale is supported (scale_attn_weights true, "
                                "scale_attn_by_inverse_layer_idx false)");
  }
  if (c.n_ctx_train <= 0) cfg.fail(Errc::bad_format, "n_positions must be positive");
  check_config(cfg, c);
}

void load_gpt2(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  read_gpt2_config(cfg, c);
  // transformers saves "transformer.h.0..."; the original OpenAI checkpoints
  // on the Hub drop the "transformer." prefix.
  const std::string p = src.has("transformer.wte.weight") ? "transformer." : "";
  const int64_t e = c.n_embd;
  w.tok_embd = src.matrix(p + "wte.weight", e, c.n_vocab);
  w.pos_embd = src.matrix(p + "wpe.weight", e, c.n_ctx_train);
  w.output_norm = src.vector(p + "ln_f.weight", e);
  w.output_norm_b = src.vector(p + "ln_f.bias", e);
  w.output = c.tied_output ? w.tok_embd : src.matrix("lm_head.weight", e, c.n_vocab);
  w.layers.assign(static_cast<size_t>(c.n_layer), LayerWeights{});
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string b = p + "h." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = src.vector(b + "ln_1.weight", e);
    l.attn_norm_b = src.vector(b + "ln_1.bias", e);
    const Weight qkv = src.transposed(b + "attn.c_attn.weight", e, 3 * e);  // [3 * n_embd, n_embd]
    l.wq = weight_rows(qkv, 0, e);
    l.wk = weight_rows(qkv, e, e);
    l.wv = weight_rows(qkv, 2 * e, e);
    const float* qkv_bias = src.vector(b + "attn.c_attn.bias", 3 * e);
    l.bq = qkv_bias;
    l.bk = qkv_bias + e;
    l.bv = qkv_bias + 2 * e;
    l.wo = src.transposed(b + "attn.c_proj.weight", e, e);
    l.bo = src.vector(b + "attn.c_proj.bias", e);
    l.ffn_norm = src.vector(b + "ln_2.weight", e);
    l.ffn_norm_b = src.vector(b + "ln_2.bias", e);
    l.w_up = src.transposed(b + "mlp.c_fc.weight", e, c.n_ff);
    l.b_up = src.vector(b + "mlp.c_fc.bias", c.n_ff);
    l.w_down = src.transposed(b + "mlp.c_proj.weight", c.n_ff, e);
    l.b_down = src.vector(b + "mlp.c_proj.bias", e);
  }
}

void gpt2_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::layer, /*rope=*/false);
  layers::gelu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::gpt2{.name = "gpt2",
                              .hf_class = "GPT2LMHeadModel",
                              .load_hf = load_gpt2,
                              .embed = layers::embed_tokens,
                              .layer = gpt2_layer,
                              .output_norm = arch::layer_output_norm};

}  // namespace troupe
