// LFM2's short-convolution block, the layer kind it puts in place of
// attention in most of its layers: x += out_proj(C * conv(B * x)), with B, C
// and x from one in_proj of the normed input and conv a depthwise causal
// convolution of a few taps (Backend::short_conv, which keeps b*x in the
// layer's cache rows).
#include "model/layers.hpp"

namespace troupe::layers {

int64_t conv_scratch_floats(const ModelConfig& c, int64_t n_tokens) {
  if (c.conv_layers.empty()) return 0;
  return n_tokens * 6 * c.n_embd;  // xb, proj, bcx (3), y
}

void short_conv_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  const ModelConfig& c = ctx.config;
  Backend& be = ctx.backend;
  const int64_t n = ctx.n_tokens;
  const int64_t e = c.n_embd;
  const size_t mark = ctx.arena.used();
  float* xb = ctx.arena.floats(n * e);       // [n_tokens, n_embd] normed input
  float* bcx = ctx.arena.floats(n * 3 * e);  // [n_tokens, 3, n_embd]: B, C, x
  float* y = ctx.arena.floats(n * e);        // [n_tokens, n_embd] gated conv output
  float* proj = ctx.arena.floats(n * e);     // [n_tokens, n_embd] block output

  norm(ctx, Norm::rms, xb, x, w.attn_norm, nullptr, n);
  be.matmul(bcx, xb, w.conv_in, n);
  if (w.conv_in_b != nullptr) be.add_bias(bcx, w.conv_in_b, n, 3 * e);
  be.short_conv(y, bcx, kv, ctx.seqs, ctx.n_seqs, w.conv_w, w.conv_b, c.conv_kernel);
  be.matmul(proj, y, w.wo, n);
  if (w.bo != nullptr) be.add_bias(proj, w.bo, n, e);
  if (c.residual_scale != 1.0f) be.scale(proj, c.residual_scale, n * e);
  be.add(x, proj, n * e);
  ctx.arena.rewind(mark);
}

}  // namespace troupe::layers
