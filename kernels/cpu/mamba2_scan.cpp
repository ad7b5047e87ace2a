// Mamba-2's selective scan (Granite 4.0-H's recurrent layers) over
// per-sequence state slots (cpu_kernels.hpp), as the Gated DeltaNet's
// (gated_delta.cpp) keeps its state: a step reads a sequence's slot, runs
// its new tokens in order and writes the slot back, so chunked prefill gives
// the bits of one call.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "kernels/cpu/recurrent_steps.hpp"
#include "kernels/cpu/vec_ops.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe::kernels {
namespace {

constexpr int64_t kMaxHeadDim = 1024;  // a head's outputs live on the stack

void check_scan(const PagedKvView& state, const AttnSeq* seqs, int n_seqs, const Mamba2Shape& g) {
  if (g.n_heads <= 0 || g.head_dim <= 0 || g.head_dim > kMaxHeadDim || g.d_state <= 0 || g.n_groups <= 0 ||
      g.n_heads % g.n_groups != 0 || g.taps < 1 || g.taps > cpu::kMaxConvTaps) {
    throw Error(Errc::invalid_argument, "mamba2_scan: bad shape (heads " + std::to_string(g.n_heads) + " of " +
                                            std::to_string(g.head_dim) + ", state " + std::to_string(g.d_state) +
                                            ", groups " + std::to_string(g.n_groups) + ", taps " +
                                            std::to_string(g.taps) + ")");
  }
  cpu::check_state_slots("mamba2_scan", state, g.state_floats(), seqs, n_seqs);
}

}  // namespace

void mamba2_scan(float* y, float* proj, const PagedKvView& state, const AttnSeq* seqs, int n_seqs,
                 const Mamba2Weights& w, const Mamba2Shape& g, ThreadPool& pool) {
  check_scan(state, seqs, n_seqs, g);
  const int64_t inner = g.inner(), conv = g.conv_dim(), width = g.proj_width();
  const int64_t hist_floats = (g.taps - 1) * conv;
  auto slot = [&](const AttnSeq& s) { return state.state + static_cast<int64_t>(s.state_slot) * state.state_floats; };

  // 1. The conv over x, B and C (each proj row's [inner, inner + conv)),
  // over ranges of channels, with its bias and SiLU.
  const cpu::VecOps& ops = cpu::vec_ops();
  pool.parallel_for(conv, [&](int64_t c0, int64_t c1) {
    for (int i = 0; i < n_seqs; ++i) {
      const AttnSeq& s = seqs[i];
      if (s.n_q == 0) continue;
      cpu::causal_conv_rows(proj + static_cast<int64_t>(s.q_begin) * width + inner, width, s.n_q, slot(s), conv,
                            w.conv, w.conv_bias, g.taps, s.n_past == 0, c0, c1, ops);
    }
  });

  // 2. The scan, head by head: h = exp(dt A) h + dt x B^T; y = h C + D x.
  const int64_t per_group = g.n_heads / g.n_groups;
  pool.parallel_for(static_cast<int64_t>(n_seqs) * g.n_heads, [&](int64_t j0, int64_t j1) {
    float out[kMaxHeadDim];
    for (int64_t j = j0; j < j1; ++j) {
      const AttnSeq& s = seqs[j / g.n_heads];
      const int64_t h = j % g.n_heads;
      const int64_t grp = h / per_group;
      float* H = slot(s) + hist_floats + h * g.head_dim * g.d_state;  // [head_dim, d_state]
      if (s.n_past == 0) std::fill(H, H + g.head_dim * g.d_state, 0.0f);
      for (int64_t t = 0; t < s.n_q; ++t) {
        const int64_t row = static_cast<int64_t>(s.q_begin) + t;
        const float* r = proj + row * width;
        const float* x = r + inner + h * g.head_dim;
        const float* B = r + 2 * inner + grp * g.d_state;
        const float* C = r + 2 * inner + g.n_groups * g.d_state + grp * g.d_state;
        const float dt = cpu::softplus(r[inner + conv + h] + w.dt_bias[h]);
        const float decay = std::exp(dt * w.a[h]);
        for (int64_t p = 0; p < g.head_dim; ++p) {
          float* Hp = H + p * g.d_state;
          const float u = dt * x[p];
          for (int64_t n = 0; n < g.d_state; ++n) Hp[n] = decay * Hp[n] + u * B[n];
        }
        ops.dot_tile(out, C, H, g.d_state, g.head_dim, g.d_state, 1.0f);
        float* yr = y + row * inner + h * g.head_dim;
        for (int64_t p = 0; p < g.head_dim; ++p) yr[p] = out[p] + w.d[h] * x[p];
      }
    }
  });

  // 3. The gated RMSNorm: y * silu(z), normed over each group of
  // inner / n_groups values, times the weight.
  int64_t n_rows = 0;
  for (int i = 0; i < n_seqs; ++i) {
    n_rows = std::max<int64_t>(n_rows, static_cast<int64_t>(seqs[i].q_begin) + seqs[i].n_q);
  }
  const int64_t group = inner / g.n_groups;
  pool.parallel_for(n_rows, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* yr = y + r * inner;
      const float* z = proj + r * width;
      ops.swiglu(yr, z, yr, inner);  // y * silu(z)
      for (int64_t q = 0; q < g.n_groups; ++q) {
        float* v = yr + q * group;
        const float ms = ops.sum_sq_diff(v, 0.0f, group) / static_cast<float>(group);
        ops.norm_apply(v, v, 0.0f, 1.0f / std::sqrt(ms + w.norm_eps), w.norm + q * group, nullptr, group);
      }
    }
  });
}

}  // namespace troupe::kernels
