// The Gated DeltaNet core of Qwen3-Next and Qwen3.5's linear-attention
// layers (cpu_kernels.hpp), over per-sequence state slots.
//
// Unlike attention, such a layer remembers the past as a fixed state per
// sequence: the last taps - 1 inputs of its causal conv, and a matrix per
// value head. A step reads a sequence's slot, runs its new tokens in order
// and writes the slot back, so a prompt gives the same state whether it
// arrives in one chunk or many (the tokens run one by one either way; the
// chunked form of the rule is a reordering of the same sums for GPUs).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "kernels/cpu/recurrent_steps.hpp"
#include "kernels/cpu/vec_ops.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe::kernels {
namespace {

constexpr int64_t kMaxKeyDim = 512;     // a head's normed q and k live on the stack,
constexpr int64_t kMaxValueDim = 4096;  // and its rows' products with them

void check_gdn(const PagedKvView& state, const AttnSeq* seqs, int n_seqs, const GatedDeltaShape& g) {
  if (g.n_k_heads <= 0 || g.n_v_heads <= 0 || g.n_v_heads % g.n_k_heads != 0 || g.k_dim <= 0 || g.v_dim <= 0 ||
      g.k_dim > kMaxKeyDim || g.v_dim > kMaxValueDim || g.taps < 1 || g.taps > cpu::kMaxConvTaps) {
    throw Error(Errc::invalid_argument, "gated_delta_net: bad shape (key heads " + std::to_string(g.n_k_heads) +
                                            ", value heads " + std::to_string(g.n_v_heads) + ", taps " +
                                            std::to_string(g.taps) + ")");
  }
  cpu::check_state_slots("gated_delta_net", state, g.state_floats(), seqs, n_seqs);
}

// x / sqrt(sum x^2 + 1e-6), times s (the FLA library's l2norm, as
// transformers computes it).
void l2norm(const cpu::VecOps& ops, float* y, const float* x, int64_t n, float s) {
  const float inv = s / std::sqrt(ops.sum_sq_diff(x, 0.0f, n) + 1e-6f);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv;
}

}  // namespace

void gated_delta_net(float* out, float* qkv, const float* b, const float* a, const PagedKvView& state,
                     const AttnSeq* seqs, int n_seqs, const float* conv_w, const float* decay, const float* dt_bias,
                     const GatedDeltaShape& g, ThreadPool& pool) {
  check_gdn(state, seqs, n_seqs, g);
  const int64_t C = g.conv_dim();
  const int64_t key_dim = g.n_k_heads * g.k_dim;
  const int64_t hist_floats = (g.taps - 1) * C;
  auto slot = [&](const AttnSeq& s) { return state.state + static_cast<int64_t>(s.state_slot) * state.state_floats; };

  // 1. The conv, over ranges of channels (each reads only its own history).
  const cpu::VecOps& ops = cpu::vec_ops();
  pool.parallel_for(C, [&](int64_t c0, int64_t c1) {
    for (int i = 0; i < n_seqs; ++i) {
      const AttnSeq& s = seqs[i];
      if (s.n_q == 0) continue;
      cpu::causal_conv_rows(qkv + static_cast<int64_t>(s.q_begin) * C, C, s.n_q, slot(s), C, conv_w, nullptr, g.taps,
                            s.n_past == 0, c0, c1, ops);
    }
  });

  // 2. The delta rule, value head by value head: its [v_dim, k_dim] state
  // rows are independent of every other head's.
  const int64_t per_k = g.n_v_heads / g.n_k_heads;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(g.k_dim));
  pool.parallel_for(static_cast<int64_t>(n_seqs) * g.n_v_heads, [&](int64_t j0, int64_t j1) {
    float qn[kMaxKeyDim], kn[kMaxKeyDim];    // one head's normed query and key
    float sk[kMaxValueDim], sq[kMaxValueDim];  // each state row's products with them
    for (int64_t j = j0; j < j1; ++j) {
      const AttnSeq& s = seqs[j / g.n_v_heads];
      const int64_t h = j % g.n_v_heads;
      const int64_t kh = g.tiled ? h % g.n_k_heads : h / per_k;
      float* S = slot(s) + hist_floats + h * g.v_dim * g.k_dim;  // [v_dim, k_dim]
      if (s.n_past == 0) std::fill(S, S + g.v_dim * g.k_dim, 0.0f);
      for (int64_t t = 0; t < s.n_q; ++t) {
        const int64_t row = static_cast<int64_t>(s.q_begin) + t;
        const float* x = qkv + row * C;
        l2norm(ops, qn, x + kh * g.k_dim, g.k_dim, q_scale);
        l2norm(ops, kn, x + key_dim + kh * g.k_dim, g.k_dim, 1.0f);
        const float* v = x + 2 * key_dim + h * g.v_dim;
        const float beta = 1.0f / (1.0f + std::exp(-b[row * g.n_v_heads + h]));
        const float gate = std::exp(decay[h] * cpu::softplus(a[row * g.n_v_heads + h] + dt_bias[h]));
        float* o = out + row * g.n_v_heads * g.v_dim + h * g.v_dim;
        // Row d of the decayed and updated state is gate Sd + delta k, so
        // its products with k and q follow from the old row's: two
        // vectorized passes read S, one writes it.
        ops.dot_tile(sk, kn, S, g.k_dim, g.v_dim, g.k_dim, 1.0f);
        ops.dot_tile(sq, qn, S, g.k_dim, g.v_dim, g.k_dim, 1.0f);
        float kq = 0.0f;
        ops.dot_tile(&kq, kn, qn, 0, 1, g.k_dim, 1.0f);
        for (int64_t d = 0; d < g.v_dim; ++d) {
          const float delta = (v[d] - gate * sk[d]) * beta;
          o[d] = gate * sq[d] + delta * kq;
          float* Sd = S + d * g.k_dim;
          for (int64_t i = 0; i < g.k_dim; ++i) Sd[i] = gate * Sd[i] + delta * kn[i];
        }
      }
    }
  });
}

}  // namespace troupe::kernels
