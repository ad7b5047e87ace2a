// Layer helpers over the Backend. Each names its intermediates with their
// shapes; temporaries come from the step arena and are rewound at the end.
#include "model/layers.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace troupe::layers {

int64_t block_scratch_floats(const ModelConfig& c, int64_t T) {
  const int64_t e = c.n_embd;
  // xb, q, k, v, att, proj (and the output gate)
  const int64_t attn = T * (2 * e + (c.attn_output_gate ? 3 : 2) * c.q_dim() + 2 * c.kv_dim());
  const int64_t ffn = T * (2 * e + 2 * std::max(c.n_ff, c.n_ff_dense));  // xb, gate, up, proj
  // xb, proj, router, rows in and out, then gate and up of an expert or of
  // the shared one (often wider), and the shared expert's gate.
  const int64_t moe = T * (4 * e + c.n_expert + 2 * std::max(c.n_ff, c.n_ff_shared) + 1);
  const int64_t embed = T * e;                                        // position embeddings
  // Command-R's parallel block holds xb and both outputs across either body.
  const int64_t parallel = c.arch == "command-r" || c.arch == "cohere2"
                               ? T * (3 * e + std::max(2 * c.q_dim() + 2 * c.kv_dim(), 2 * c.n_ff))
                               : 0;
  return std::max({attn, ffn, moe, embed, parallel, mla_scratch_floats(c, T), conv_scratch_floats(c, T),
                   gdn_scratch_floats(c, T), mamba_scratch_floats(c, T)});
}

void norm(const StepContext& ctx, Norm kind, float* y, const float* x, const float* weight, const float* bias,
          int64_t n_rows) {
  const ModelConfig& c = ctx.config;
  if (kind == Norm::rms) {
    ctx.backend.rmsnorm(y, x, weight, n_rows, c.n_embd, c.norm_eps);
  } else {
    ctx.backend.layernorm(y, x, weight, bias, n_rows, c.n_embd, c.norm_eps);
  }
}

namespace {

// ModelConfig::attn_temp_beta: q [n_tokens, q_dim] rows times their
// position's temperature, one Backend::scale per run of rows that share it
// (the factor moves every attn_temp_floor positions, so a step has about
// one run per sequence past the first attn_temp_floor positions, none before).
void temper_queries(const StepContext& ctx, float* q) {
  const ModelConfig& c = ctx.config;
  auto steps = [&](int64_t t) { return ctx.pos[t] / c.attn_temp_floor; };  // floor: positions are >= 0
  for (int64_t t = 0; t < ctx.n_tokens;) {
    const int64_t s = steps(t);
    int64_t end = t + 1;
    while (end < ctx.n_tokens && steps(end) == s) ++end;
    if (s > 0) {
      const float f = 1.0f + c.attn_temp_beta * std::log(1.0f + static_cast<float>(s));
      ctx.backend.scale(q + t * c.q_dim(), f, (end - t) * c.q_dim());
    }
    t = end;
  }
}

}  // namespace

void self_attention(const StepContext& ctx, int64_t il, const PagedKvView& kv, const float* xb, float* out,
                    bool rope) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  const ModelConfig& c = ctx.config;
  Backend& be = ctx.backend;
  const int64_t n = ctx.n_tokens;
  const size_t mark = ctx.arena.used();
  float* q = ctx.arena.floats(n * c.q_dim());    // [n_tokens, n_head, head_dim]
  float* k = ctx.arena.floats(n * c.kv_dim());   // [n_tokens, n_head_kv, head_dim]
  float* v = ctx.arena.floats(n * c.kv_dim());   // [n_tokens, n_head_kv, head_dim]
  float* att = ctx.arena.floats(n * c.q_dim());  // [n_tokens, n_head, head_dim]
  // [n_tokens, n_head, head_dim] Qwen3-Next's output gate, else unused
  float* gate = w.wq_gate.data != nullptr ? ctx.arena.floats(n * c.q_dim()) : nullptr;

  if (gate != nullptr) {
    const Backend::MatmulOut qkv[] = {{q, &w.wq}, {k, &w.wk}, {v, &w.wv}, {gate, &w.wq_gate}};
    be.matmul_n(qkv, xb, n);
  } else {
    const Backend::MatmulOut qkv[] = {{q, &w.wq}, {k, &w.wk}, {v, &w.wv}};
    be.matmul_n(qkv, xb, n);
  }
  if (w.bq != nullptr) be.add_bias(q, w.bq, n, c.q_dim());
  if (w.bk != nullptr) be.add_bias(k, w.bk, n, c.kv_dim());
  if (w.bv != nullptr) be.add_bias(v, w.bv, n, c.kv_dim());
  // Per-head norms: every head's head_dim values are one row; OLMo 2's
  // whole-projection norms: every token's.
  auto qk_norms = [&] {
    if (c.qk_norm_whole) {
      if (w.q_norm != nullptr) be.rmsnorm(q, q, w.q_norm, n, c.q_dim(), c.norm_eps);
      if (w.k_norm != nullptr) be.rmsnorm(k, k, w.k_norm, n, c.kv_dim(), c.norm_eps);
    } else {
      if (w.q_norm != nullptr) be.rmsnorm(q, q, w.q_norm, n * c.n_head, c.head_dim, c.norm_eps);
      if (w.k_norm != nullptr) be.rmsnorm(k, k, w.k_norm, n * c.n_head_kv, c.head_dim, c.norm_eps);
    }
  };
  if (!c.qk_norm_after_rope) qk_norms();

  if (rope) {
    // Gemma 3's local layers: their own base, unscaled.
    const bool local = c.is_local(il) && !c.local_layers_share_rope;
    const kernels::RopeParams p{
        .layout = c.rope_layout,
        .n_rot = c.n_rot,
        .theta = local ? c.rope_local_theta : c.rope_theta,
        .freq_scale = local ? 1.0f : c.rope_freq_scale,
        .freq_factors = local || c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data(),
        .mscale = local ? 1.0f : c.rope_mscale};
    be.rope(q, ctx.pos, n, c.n_head, c.head_dim, p);
    be.rope(k, ctx.pos, n, c.n_head_kv, c.head_dim, p);
  }
  if (c.qk_norm_after_rope) qk_norms();  // Hunyuan
  if (c.attn_temp_beta != 0.0f) temper_queries(ctx, q);

  be.kv_write(kv, k, v, ctx.seqs, ctx.n_seqs);
  const float scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  be.attention(att, q, kv, ctx.seqs, ctx.n_seqs, c.n_head, scale, c.window(il), c.attn_softcap, w.attn_sinks, c.causal);
  if (gate != nullptr) be.sigmoid_gate(att, gate, n * c.q_dim());
  be.matmul(out, att, w.wo, n);
  if (w.bo != nullptr) be.add_bias(out, w.bo, n, c.n_embd);
  ctx.arena.rewind(mark);
}

void gated_ffn(const StepContext& ctx, const Weight& gate, const Weight& up, const Weight& down, const float* xb,
               float* out, int64_t n_rows, Gate act) {
  const int64_t n_ff = gate.n_out;
  const size_t mark = ctx.arena.used();
  float* g = ctx.arena.floats(n_rows * n_ff);  // [n_rows, n_ff]
  float* u = ctx.arena.floats(n_rows * n_ff);  // [n_rows, n_ff]
  const Backend::MatmulOut gate_up[] = {{g, &gate}, {u, &up}};
  ctx.backend.matmul_n(gate_up, xb, n_rows);
  if (act == Gate::silu) {
    ctx.backend.swiglu(g, g, u, n_rows * n_ff);
  } else {
    ctx.backend.geglu(g, g, u, n_rows * n_ff);
  }
  ctx.backend.matmul(out, g, down, n_rows);
  ctx.arena.rewind(mark);
}

void gelu_ffn(const StepContext& ctx, const LayerWeights& w, const float* xb, float* out) {
  const int64_t n = ctx.n_tokens;
  const int64_t n_ff = w.w_up.n_out;
  const size_t mark = ctx.arena.used();
  float* h = ctx.arena.floats(n * n_ff);  // [n_tokens, n_ff]
  ctx.backend.matmul(h, xb, w.w_up, n);
  if (w.b_up != nullptr) ctx.backend.add_bias(h, w.b_up, n, n_ff);
  if (ctx.config.gelu_quick) {
    ctx.backend.quick_gelu(h, h, n * n_ff);
  } else if (ctx.config.gelu_erf) {
    ctx.backend.gelu_erf(h, h, n * n_ff);
  } else {
    ctx.backend.gelu(h, h, n * n_ff);
  }
  ctx.backend.matmul(out, h, w.w_down, n);
  if (w.b_down != nullptr) ctx.backend.add_bias(out, w.b_down, n, ctx.config.n_embd);
  ctx.arena.rewind(mark);
}

void expert_ffn(const StepContext& ctx, const ExpertWeights& ex, const float* xb, float* out, int64_t n_rows) {
  const ModelConfig& c = ctx.config;
  if (c.expert_swiglu_limit <= 0.0f && ex.b_gate == nullptr && ex.b_up == nullptr && ex.b_down == nullptr) {
    swiglu_ffn(ctx, ex.w_gate, ex.w_up, ex.w_down, xb, out, n_rows);
    return;
  }
  Backend& be = ctx.backend;
  const int64_t n_ff = ex.w_gate.n_out;
  const size_t mark = ctx.arena.used();
  float* g = ctx.arena.floats(n_rows * n_ff);  // [n_rows, n_ff]
  float* u = ctx.arena.floats(n_rows * n_ff);  // [n_rows, n_ff]
  const Backend::MatmulOut gate_up[] = {{g, &ex.w_gate}, {u, &ex.w_up}};
  be.matmul_n(gate_up, xb, n_rows);
  if (ex.b_gate != nullptr) be.add_bias(g, ex.b_gate, n_rows, n_ff);
  if (ex.b_up != nullptr) be.add_bias(u, ex.b_up, n_rows, n_ff);
  if (c.expert_swiglu_limit > 0.0f) {
    be.swiglu_oai(g, g, u, n_rows * n_ff, c.expert_swiglu_alpha, c.expert_swiglu_limit);
  } else {
    be.swiglu(g, g, u, n_rows * n_ff);
  }
  be.matmul(out, g, ex.w_down, n_rows);
  if (ex.b_down != nullptr) be.add_bias(out, ex.b_down, n_rows, c.n_embd);
  ctx.arena.rewind(mark);
}

namespace {

// Top-k experts of one token's router logits and their softmax weights over
// just those k (equal to transformers' softmax-all, top-k, renormalise).
// Ties go to the lower expert index.
void route_token(const float* logits, int64_t n_expert, int64_t k, bool normalize, int32_t* choice, float* gate) {
  for (int64_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int64_t e = 0; e < n_expert; ++e) {
      if (std::find(choice, choice + j, static_cast<int32_t>(e)) != choice + j) continue;
      if (best < 0 || logits[e] > logits[best]) best = static_cast<int32_t>(e);
    }
    choice[j] = best;
  }
  const float top = logits[choice[0]];
  float sum = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    gate[j] = std::exp(logits[choice[j]] - top);
    sum += gate[j];
  }
  if (!normalize) {
    // Shares of a softmax over every expert: the experts not chosen count
    // in the denominator too.
    for (int64_t e = 0; e < n_expert; ++e) {
      if (std::find(choice, choice + k, static_cast<int32_t>(e)) == choice + k) sum += std::exp(logits[e] - top);
    }
  }
  for (int64_t j = 0; j < k; ++j) gate[j] /= sum;
}

// The DeepSeek routing (ModelConfig::ExpertRouter) of one token: scores s
// (a softmax over the logits, or their sigmoids); experts chosen by s + bias,
// only from the best groups_used of n_groups equal groups (a group's worth:
// its best score under the softmax, the sum of its two best biased scores
// under the sigmoid); weights the chosen s, over their sum (plus
// expert_weights_norm_eps, as transformers) when normalize, times scale. Ties go to the lower index.
// scratch: [2 n_expert + n_groups].
void route_token_deepseek(const float* logits, const float* bias, const ModelConfig& c, float* scratch,
                          int32_t* choice, float* gate) {
  const int64_t n_expert = c.n_expert;
  const int64_t n_groups = c.n_expert_groups;
  const bool sigmoid = c.expert_router == ModelConfig::ExpertRouter::deepseek_sigmoid;
  float* score = scratch;                 // [n_expert]
  float* biased = scratch + n_expert;     // [n_expert]; -inf outside the chosen groups
  float* group = scratch + 2 * n_expert;  // [n_groups]
  if (sigmoid) {
    for (int64_t e = 0; e < n_expert; ++e) score[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  } else {
    const float top = *std::max_element(logits, logits + n_expert);
    float sum = 0.0f;
    for (int64_t e = 0; e < n_expert; ++e) sum += score[e] = std::exp(logits[e] - top);
    for (int64_t e = 0; e < n_expert; ++e) score[e] /= sum;
  }
  for (int64_t e = 0; e < n_expert; ++e) biased[e] = score[e] + (bias != nullptr ? bias[e] : 0.0f);
  if (c.n_expert_groups_used < n_groups) {
    const int64_t per = n_expert / n_groups;
    for (int64_t g = 0; g < n_groups; ++g) {
      const float* b = biased + g * per;
      const int64_t top = std::max_element(b, b + per) - b;
      float second = -INFINITY;
      for (int64_t j = 0; j < per; ++j) {
        if (j != top) second = std::max(second, b[j]);
      }
      group[g] = sigmoid ? b[top] + second : b[top];
    }
    for (int64_t j = 0; j < n_groups - c.n_expert_groups_used; ++j) {  // drop the worst groups
      const int64_t worst = std::min_element(group, group + n_groups) - group;
      group[worst] = INFINITY;
      std::fill(biased + worst * per, biased + (worst + 1) * per, -INFINITY);
    }
  }
  const int64_t k = c.n_expert_used;
  float sum = 0.0f;
  for (int64_t j = 0; j < k; ++j) {
    const int64_t best = std::max_element(biased, biased + n_expert) - biased;
    choice[j] = static_cast<int32_t>(best);
    gate[j] = score[best];
    sum += gate[j];
    biased[best] = -INFINITY;
  }
  for (int64_t j = 0; j < k; ++j) {
    gate[j] = (c.expert_weights_norm ? gate[j] / (sum + c.expert_weights_norm_eps) : gate[j]) * c.expert_weights_scale;
  }
}

}  // namespace

void moe_ffn(const StepContext& ctx, const LayerWeights& w, const float* xb, float* out) {
  const ModelConfig& c = ctx.config;
  Backend& be = ctx.backend;
  HostScratch& h = ctx.host;
  const int64_t n = ctx.n_tokens;
  const int64_t n_expert = static_cast<int64_t>(w.experts.size());
  const int64_t k = c.n_expert_used;
  const int64_t e = c.n_embd;
  if (n_expert == 0 || k <= 0 || k > n_expert) {
    throw Error(Errc::internal, "moe_ffn: layer has " + std::to_string(n_expert) + " experts, routes to " +
                                    std::to_string(k));
  }
  const size_t mark = ctx.arena.used();
  float* router = ctx.arena.floats(n * n_expert);  // [n_tokens, n_expert]
  be.matmul(router, xb, w.ffn_router, n);
  if (w.ffn_router_b != nullptr) be.add_bias(router, w.ffn_router_b, n, n_expert);
  h.router.resize(static_cast<size_t>(n * n_expert));
  be.copy_to_host(h.router.data(), router, h.router.size() * sizeof(float));
  be.synchronize();

  h.choice.resize(static_cast<size_t>(n * k));
  h.gate.resize(static_cast<size_t>(n * k));
  if (c.expert_router != ModelConfig::ExpertRouter::topk_softmax) {
    h.expert_out.resize(static_cast<size_t>(2 * n_expert + c.n_expert_groups));  // the scores, as scratch
    for (int64_t t = 0; t < n; ++t) {
      route_token_deepseek(h.router.data() + t * n_expert, w.expert_score_bias, c, h.expert_out.data(),
                           h.choice.data() + t * k, h.gate.data() + t * k);
    }
  } else {
    for (int64_t t = 0; t < n; ++t) {
      route_token(h.router.data() + t * n_expert, n_expert, k, c.expert_weights_norm, h.choice.data() + t * k,
                  h.gate.data() + t * k);
    }
  }

  // Experts in index order, each on the rows routed to it; the weighted
  // outputs are summed on the host in that order (as transformers adds them).
  h.combined.assign(static_cast<size_t>(n * e), 0.0f);
  auto add_weighted = [&](int64_t row, const float* src, float g) {  // combined[row] += g * src
    float* dst = h.combined.data() + row * e;
    for (int64_t d = 0; d < e; ++d) dst[d] += g * src[d];
  };
  float* rows_in = ctx.arena.floats(n * e);   // [rows of one expert, n_embd]
  float* rows_out = ctx.arena.floats(n * e);  // [rows of one expert, n_embd]
  for (int64_t x = 0; x < n_expert; ++x) {
    h.rows.clear();
    h.row_gate.clear();
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        if (h.choice[static_cast<size_t>(t * k + j)] == x) {
          h.rows.push_back(static_cast<int32_t>(t));
          h.row_gate.push_back(h.gate[static_cast<size_t>(t * k + j)]);
        }
      }
    }
    const auto m = static_cast<int64_t>(h.rows.size());
    if (m == 0) continue;
    const ExpertWeights& ex = w.experts[static_cast<size_t>(x)];
    be.gather_rows(rows_in, xb, h.rows.data(), m, e);
    expert_ffn(ctx, ex, rows_in, rows_out, m);
    h.expert_out.resize(static_cast<size_t>(m * e));
    be.copy_to_host(h.expert_out.data(), rows_out, h.expert_out.size() * sizeof(float));
    be.synchronize();
    for (int64_t i = 0; i < m; ++i) {
      add_weighted(h.rows[static_cast<size_t>(i)], h.expert_out.data() + i * e, h.row_gate[static_cast<size_t>(i)]);
    }
  }
  if (w.shared.w_gate.data != nullptr) {
    // The shared expert on every row, added after the routed sum
    // (transformers' order), weighted by sigmoid(shared_gate · x) where the
    // model has that gate (Qwen2-MoE), else by 1 (GLM-4.5).
    const bool gated = w.shared_gate.data != nullptr;
    swiglu_ffn(ctx, w.shared.w_gate, w.shared.w_up, w.shared.w_down, xb, rows_out, n);
    h.expert_out.resize(static_cast<size_t>(n * e));
    h.row_gate.resize(static_cast<size_t>(n));
    be.copy_to_host(h.expert_out.data(), rows_out, h.expert_out.size() * sizeof(float));
    if (gated) {
      float* gate = ctx.arena.floats(n);  // [n_tokens, 1]
      be.matmul(gate, xb, w.shared_gate, n);
      be.copy_to_host(h.row_gate.data(), gate, h.row_gate.size() * sizeof(float));
    }
    be.synchronize();
    for (int64_t t = 0; t < n; ++t) {
      const float g = h.row_gate[static_cast<size_t>(t)];
      add_weighted(t, h.expert_out.data() + t * e, gated ? 1.0f / (1.0f + std::exp(-g)) : 1.0f);
    }
  }
  be.copy_from_host(out, h.combined.data(), h.combined.size() * sizeof(float));
  ctx.arena.rewind(mark);
}

namespace {

// x += body(norm(x)): the pre-norm residual shape every block shares, with
// Gemma's RMSNorm of the block's output when post_weight is given. The
// block's temporaries ([n_tokens, n_embd] each) are released at its end.
template <class Body>
void residual(const StepContext& ctx, float* x, Norm kind, const float* weight, const float* bias, Body&& body,
              const float* post_weight = nullptr) {
  const int64_t n = ctx.n_tokens * ctx.config.n_embd;
  const size_t mark = ctx.arena.used();
  float* xb = ctx.arena.floats(n);    // [n_tokens, n_embd] normed input
  float* proj = ctx.arena.floats(n);  // [n_tokens, n_embd] block output
  norm(ctx, kind, xb, x, weight, bias, ctx.n_tokens);
  body(xb, proj);
  if (post_weight != nullptr) norm(ctx, Norm::rms, proj, proj, post_weight, nullptr, ctx.n_tokens);
  if (ctx.config.residual_scale != 1.0f) ctx.backend.scale(proj, ctx.config.residual_scale, n);
  ctx.backend.add(x, proj, n);
  ctx.arena.rewind(mark);
}

// x += post_norm(body(x)): OLMo 2's residual, normed after the block only.
template <class Body>
void post_norm_residual(const StepContext& ctx, float* x, const float* post_weight, Body&& body) {
  const int64_t n = ctx.n_tokens * ctx.config.n_embd;
  const size_t mark = ctx.arena.used();
  float* proj = ctx.arena.floats(n);  // [n_tokens, n_embd] block output
  body(x, proj);
  norm(ctx, Norm::rms, proj, proj, post_weight, nullptr, ctx.n_tokens);
  ctx.backend.add(x, proj, n);
  ctx.arena.rewind(mark);
}

}  // namespace

void post_norm_attention_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  // EXAONE 4's global layers attend without RoPE (ModelConfig::nope_layers).
  post_norm_residual(ctx, x, w.attn_post_norm, [&](const float* in, float* proj) {
    self_attention(ctx, il, kv, in, proj, /*rope=*/ctx.config.ropes(il));
  });
}

void post_norm_swiglu_block(const StepContext& ctx, int64_t il, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  post_norm_residual(ctx, x, w.ffn_post_norm, [&](const float* in, float* proj) {
    swiglu_ffn(ctx, w.w_gate, w.w_up, w.w_down, in, proj, ctx.n_tokens);
  });
}

void attention_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x, Norm kind, bool rope) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  residual(ctx, x, kind, w.attn_norm, w.attn_norm_b,
           [&](float* xb, float* proj) { self_attention(ctx, il, kv, xb, proj, rope); });
}

void sandwich_attention_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  residual(
      ctx, x, Norm::rms, w.attn_norm, nullptr,
      [&](float* xb, float* proj) { self_attention(ctx, il, kv, xb, proj, /*rope=*/true); }, w.attn_post_norm);
}

void sandwich_geglu_block(const StepContext& ctx, int64_t il, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  residual(
      ctx, x, Norm::rms, w.ffn_norm, nullptr,
      [&](float* xb, float* proj) {
        gated_ffn(ctx, w.w_gate, w.w_up, w.w_down, xb, proj, ctx.n_tokens, Gate::gelu);
      },
      w.ffn_post_norm);
}

void parallel_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  const int64_t n = ctx.n_tokens * ctx.config.n_embd;
  const size_t mark = ctx.arena.used();
  float* xb = ctx.arena.floats(n);    // [n_tokens, n_embd]
  float* attn = ctx.arena.floats(n);  // [n_tokens, n_embd]
  float* mlp = ctx.arena.floats(n);   // [n_tokens, n_embd]
  norm(ctx, Norm::layer, xb, x, w.attn_norm, w.attn_norm_b, ctx.n_tokens);
  self_attention(ctx, il, kv, xb, attn, ctx.config.ropes(il));
  swiglu_ffn(ctx, w.w_gate, w.w_up, w.w_down, xb, mlp, ctx.n_tokens);
  ctx.backend.add(x, attn, n);  // (x + attn) + mlp, transformers' order
  ctx.backend.add(x, mlp, n);
  ctx.arena.rewind(mark);
}

void dense_or_moe_block(const StepContext& ctx, int64_t il, float* x) {
  if (ctx.weights.layers[static_cast<size_t>(il)].experts.empty()) {
    swiglu_block(ctx, il, x);
  } else {
    moe_block(ctx, il, x);
  }
}

void mla_attention_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  residual(ctx, x, Norm::rms, w.attn_norm, nullptr,
           [&](float* xb, float* proj) { mla_attention(ctx, il, kv, xb, proj); });
}

void sandwich_swiglu_block(const StepContext& ctx, int64_t il, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  residual(
      ctx, x, Norm::rms, w.ffn_norm, nullptr,
      [&](float* xb, float* proj) { swiglu_ffn(ctx, w.w_gate, w.w_up, w.w_down, xb, proj, ctx.n_tokens); },
      w.ffn_post_norm);
}

void swiglu_block(const StepContext& ctx, int64_t il, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  residual(ctx, x, Norm::rms, w.ffn_norm, nullptr, [&](float* xb, float* proj) {
    swiglu_ffn(ctx, w.w_gate, w.w_up, w.w_down, xb, proj, ctx.n_tokens);
  });
}

void gelu_block(const StepContext& ctx, int64_t il, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  residual(ctx, x, Norm::layer, w.ffn_norm, w.ffn_norm_b, [&](float* xb, float* proj) { gelu_ffn(ctx, w, xb, proj); });
}

void xielu_block(const StepContext& ctx, int64_t il, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  residual(ctx, x, Norm::rms, w.ffn_norm, nullptr, [&](float* xb, float* proj) {
    const int64_t n = ctx.n_tokens;
    const int64_t n_ff = w.w_up.n_out;
    const size_t mark = ctx.arena.used();
    float* h = ctx.arena.floats(n * n_ff);  // [n_tokens, n_ff]
    ctx.backend.matmul(h, xb, w.w_up, n);
    ctx.backend.xielu(h, h, n * n_ff, w.xielu.alpha_p, w.xielu.alpha_n, w.xielu.beta, w.xielu.eps);
    ctx.backend.matmul(proj, h, w.w_down, n);
    ctx.arena.rewind(mark);
  });
}

void moe_block(const StepContext& ctx, int64_t il, float* x) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  residual(ctx, x, Norm::rms, w.ffn_norm, nullptr, [&](float* xb, float* proj) { moe_ffn(ctx, w, xb, proj); });
}

void output_rms_norm(const StepContext& ctx, float* x, int64_t n_rows) {
  norm(ctx, Norm::rms, x, x, ctx.weights.output_norm, nullptr, n_rows);
  if (ctx.config.logit_scale != 1.0f) ctx.backend.scale(x, 1.0f / ctx.config.logit_scale, n_rows * ctx.config.n_embd);
}

void output_layer_norm(const StepContext& ctx, float* x, int64_t n_rows) {
  norm(ctx, Norm::layer, x, x, ctx.weights.output_norm, nullptr, n_rows);
  if (ctx.config.logit_scale != 1.0f) ctx.backend.scale(x, 1.0f / ctx.config.logit_scale, n_rows * ctx.config.n_embd);
}

void no_output_norm(const StepContext&, float*, int64_t) {}

void embed_tokens(const StepContext& ctx, float* x) {
  ctx.backend.embedding(x, ctx.weights.tok_embd, ctx.tokens, ctx.n_tokens);
  if (ctx.config.embed_scale != 1.0f) ctx.backend.scale(x, ctx.config.embed_scale, ctx.n_tokens * ctx.config.n_embd);
  if (ctx.weights.pos_embd.data == nullptr) return;
  const size_t mark = ctx.arena.used();
  float* p = ctx.arena.floats(ctx.n_tokens * ctx.config.n_embd);  // [n_tokens, n_embd]
  ctx.backend.embedding(p, ctx.weights.pos_embd, ctx.pos, ctx.n_tokens);
  ctx.backend.add(x, p, ctx.n_tokens * ctx.config.n_embd);
  ctx.arena.rewind(mark);
}

}  // namespace troupe::layers
