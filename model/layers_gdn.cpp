// Qwen3-Next and Qwen3.5's linear-attention block, the recurrent layer they
// put in three of every four places: x += out_proj(norm(o) * silu(z)), o the
// Gated DeltaNet's output for q, k and v (Backend::gated_delta_net, which
// carries the per-sequence state), norm an RMSNorm over each value head.
#include "model/layers.hpp"

namespace troupe::layers {

int64_t gdn_scratch_floats(const ModelConfig& c, int64_t n_tokens) {
  if (c.recurrent_layers.empty() || c.recurrent_kind != ModelConfig::RecurrentKind::gated_delta) return 0;
  // xb, qkv, z, b, a, o, proj
  return n_tokens * (2 * c.n_embd + c.gdn_conv_dim() + 2 * c.gdn_value_dim() + 2 * c.gdn_v_heads);
}

void gated_delta_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  const ModelConfig& c = ctx.config;
  Backend& be = ctx.backend;
  const int64_t n = ctx.n_tokens;
  const int64_t e = c.n_embd;
  const int64_t hv = c.gdn_v_heads;
  const size_t mark = ctx.arena.used();
  float* xb = ctx.arena.floats(n * e);                      // [n_tokens, n_embd] normed input
  float* qkv = ctx.arena.floats(n * c.gdn_conv_dim());      // [n_tokens, conv_dim]
  float* z = ctx.arena.floats(n * c.gdn_value_dim());       // [n_tokens, n_v_heads, v_dim]
  float* b = ctx.arena.floats(n * hv);                      // [n_tokens, n_v_heads]
  float* a = ctx.arena.floats(n * hv);                      // [n_tokens, n_v_heads]
  float* o = ctx.arena.floats(n * c.gdn_value_dim());       // [n_tokens, n_v_heads, v_dim]
  float* proj = ctx.arena.floats(n * e);                    // [n_tokens, n_embd] block output

  norm(ctx, Norm::rms, xb, x, w.attn_norm, nullptr, n);
  const Backend::MatmulOut outs[] = {{qkv, &w.gdn_qkv}, {z, &w.gdn_z}, {b, &w.gdn_b}, {a, &w.gdn_a}};
  be.matmul_n(outs, xb, n);
  const kernels::GatedDeltaShape shape{.n_k_heads = c.gdn_k_heads,
                                       .n_v_heads = hv,
                                       .k_dim = c.gdn_k_dim,
                                       .v_dim = c.gdn_v_dim,
                                       .taps = c.conv_kernel,
                                       .tiled = c.gdn_v_tiled};
  be.gated_delta_net(o, qkv, b, a, kv, ctx.seqs, ctx.n_seqs, w.gdn_conv, w.gdn_decay, w.gdn_dt_bias, shape);
  // Qwen3NextRMSNormGated: each head's output normed (a plain weight, not
  // 1 + w), then times silu(z).
  be.rmsnorm(o, o, w.gdn_norm, n * hv, c.gdn_v_dim, c.norm_eps);
  be.swiglu(o, z, o, n * c.gdn_value_dim());
  be.matmul(proj, o, w.wo, n);
  if (c.residual_scale != 1.0f) be.scale(proj, c.residual_scale, n * e);
  be.add(x, proj, n * e);
  ctx.arena.rewind(mark);
}

}  // namespace troupe::layers
