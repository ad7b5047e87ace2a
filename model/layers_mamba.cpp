// Mamba-2's block, the recurrent layer of Granite 4.0-H: x += out_proj(y),
// y the selective scan of the RMS-normed input's x, B and C after a causal
// conv, gated by silu(z) and RMS-normed per group (Backend::mamba2_scan,
// which carries the per-sequence state).
#include "model/layers.hpp"

namespace troupe::layers {

int64_t mamba_scratch_floats(const ModelConfig& c, int64_t n_tokens) {
  if (c.recurrent_layers.empty() || c.recurrent_kind != ModelConfig::RecurrentKind::mamba2) return 0;
  const kernels::Mamba2Shape g = c.mamba2_shape();
  return n_tokens * (2 * c.n_embd + g.proj_width() + g.inner());  // xb, proj, y, out
}

void mamba2_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  const ModelConfig& c = ctx.config;
  Backend& be = ctx.backend;
  const kernels::Mamba2Shape g = c.mamba2_shape();
  const int64_t n = ctx.n_tokens;
  const int64_t e = c.n_embd;
  const size_t mark = ctx.arena.used();
  float* xb = ctx.arena.floats(n * e);                  // [n_tokens, n_embd] normed input
  float* proj = ctx.arena.floats(n * g.proj_width());   // [n_tokens, z | x B C | dt]
  float* y = ctx.arena.floats(n * g.inner());           // [n_tokens, n_heads, head_dim]
  float* out = ctx.arena.floats(n * e);                 // [n_tokens, n_embd] block output

  norm(ctx, Norm::rms, xb, x, w.attn_norm, nullptr, n);
  be.matmul(proj, xb, w.ssm_in, n);
  const kernels::Mamba2Weights mw{.conv = w.ssm_conv,
                                  .conv_bias = w.ssm_conv_b,
                                  .a = w.ssm_a,
                                  .dt_bias = w.ssm_dt_bias,
                                  .d = w.ssm_d,
                                  .norm = w.ssm_norm,
                                  .norm_eps = c.norm_eps};
  be.mamba2_scan(y, proj, kv, ctx.seqs, ctx.n_seqs, mw, g);
  be.matmul(out, y, w.wo, n);
  if (c.residual_scale != 1.0f) be.scale(out, c.residual_scale, n * e);
  be.add(x, out, n * e);
  ctx.arena.rewind(mark);
}

}  // namespace troupe::layers
