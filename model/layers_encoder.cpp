// The encoders' blocks (BERT, RoBERTa, DistilBERT, NomicBERT, ModernBERT)
// and their input, over the shared helpers of layers.cpp: post-LN residuals
// (the norm after the add) and ModernBERT's pre-norm GLU block.
#include "model/layers.hpp"

namespace troupe::layers {
namespace {

// x = LayerNorm(x + body(x)): BERT's post-LN residual, the norm (weight and
// bias) after the add.
template <class Body>
void post_layer_norm_residual(const StepContext& ctx, float* x, const float* weight, const float* bias, Body&& body) {
  const int64_t n = ctx.n_tokens * ctx.config.n_embd;
  const size_t mark = ctx.arena.used();
  float* proj = ctx.arena.floats(n);  // [n_tokens, n_embd] block output
  body(x, proj);
  ctx.backend.add(x, proj, n);
  norm(ctx, Norm::layer, x, x, weight, bias, ctx.n_tokens);
  ctx.arena.rewind(mark);
}

}  // namespace

void pre_norm_glu_encoder_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  const ModelConfig& c = ctx.config;
  Backend& be = ctx.backend;
  const int64_t n = ctx.n_tokens;
  const size_t mark = ctx.arena.used();
  float* xb = ctx.arena.floats(n * c.n_embd);    // [n_tokens, n_embd] normed input
  float* proj = ctx.arena.floats(n * c.n_embd);  // [n_tokens, n_embd] block output
  const float* in = x;
  if (w.attn_norm != nullptr) {
    norm(ctx, Norm::layer, xb, x, w.attn_norm, w.attn_norm_b, n);
    in = xb;
  }
  self_attention(ctx, il, kv, in, proj, /*rope=*/true);
  be.add(x, proj, n * c.n_embd);

  norm(ctx, Norm::layer, xb, x, w.ffn_norm, w.ffn_norm_b, n);
  float* g = ctx.arena.floats(n * c.n_ff);  // [n_tokens, n_ff]
  float* u = ctx.arena.floats(n * c.n_ff);  // [n_tokens, n_ff]
  const Backend::MatmulOut gate_up[] = {{g, &w.w_gate}, {u, &w.w_up}};
  be.matmul_n(gate_up, xb, n);
  if (c.glu_silu) {
    be.swiglu(g, g, u, n * c.n_ff);
  } else {
    be.geglu_erf(g, g, u, n * c.n_ff);
  }
  be.matmul(proj, g, w.w_down, n);
  be.add(x, proj, n * c.n_embd);
  ctx.arena.rewind(mark);
}

void post_layer_norm_attention_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  post_layer_norm_residual(ctx, x, w.attn_norm, w.attn_norm_b, [&](const float* in, float* proj) {
    self_attention(ctx, il, kv, in, proj, /*rope=*/ctx.config.n_rot > 0);
  });
}

void post_layer_norm_gelu_block(const StepContext& ctx, int64_t il, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  post_layer_norm_residual(ctx, x, w.ffn_norm, w.ffn_norm_b,
                           [&](const float* in, float* proj) { gelu_ffn(ctx, w, in, proj); });
}

void post_layer_norm_swiglu_block(const StepContext& ctx, int64_t il, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  post_layer_norm_residual(ctx, x, w.ffn_norm, w.ffn_norm_b, [&](const float* in, float* proj) {
    swiglu_ffn(ctx, w.w_gate, w.w_up, w.w_down, in, proj, ctx.n_tokens);
  });
}

void embed_encoder_tokens(const StepContext& ctx, float* x) {
  embed_tokens(ctx, x);
  const ModelWeights& w = ctx.weights;
  const int64_t e = ctx.config.n_embd;
  if (w.type_embd != nullptr && ctx.token_types == nullptr) {
    ctx.backend.add_bias(x, w.type_embd, ctx.n_tokens, e);  // every token of type 0
  } else if (w.type_embd != nullptr) {
    const size_t mark = ctx.arena.used();
    float* t = ctx.arena.floats(ctx.n_tokens * e);  // [n_tokens, n_embd] each token's type row
    ctx.backend.gather_rows(t, w.type_embd, ctx.token_types, ctx.n_tokens, e);
    ctx.backend.add(x, t, ctx.n_tokens * e);
    ctx.arena.rewind(mark);
  }
  norm(ctx, Norm::layer, x, x, w.embd_norm, w.embd_norm_b, ctx.n_tokens);
}

}  // namespace troupe::layers
