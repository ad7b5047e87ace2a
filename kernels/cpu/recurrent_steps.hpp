// What the recurrent layers' kernels (gated_delta.cpp, mamba2_scan.cpp)
// share: the checks of a batch's state slots, softplus, and the causal
// depthwise conv over one sequence's new tokens, its history in the
// sequence's state slot.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "kernels/cpu/vec_ops.hpp"
#include "memory/paged_kv.hpp"

namespace troupe::kernels::cpu {

inline constexpr int64_t kMaxConvTaps = 16;
inline constexpr int64_t kConvBlock = 64;  // channels a call keeps on the stack

// Throws Errc::invalid_argument (naming fn) unless the slots hold
// state_floats each and every sequence has sane counts and a slot among them.
inline void check_state_slots(const char* fn, const PagedKvView& state, int64_t state_floats, const AttnSeq* seqs,
                              int n_seqs) {
  const std::string f(fn);
  if (state.state == nullptr || state.state_floats != state_floats) {
    throw Error(Errc::invalid_argument, f + ": the state slots hold " + std::to_string(state.state_floats) +
                                            " floats each, the layer needs " + std::to_string(state_floats));
  }
  if (n_seqs < 0 || (n_seqs > 0 && seqs == nullptr)) throw Error(Errc::invalid_argument, f + ": bad sequences");
  for (int i = 0; i < n_seqs; ++i) {
    const AttnSeq& s = seqs[i];
    if (s.n_q < 0 || s.n_past < 0 || s.q_begin < 0) {
      throw Error(Errc::invalid_argument, f + ": sequence " + std::to_string(i) + " has negative q_begin, n_q or n_past");
    }
    if (s.state_slot < 0 || s.state_slot >= state.n_state_slots) {
      throw Error(Errc::invalid_argument, f + ": sequence " + std::to_string(i) + " has state slot " +
                                              std::to_string(s.state_slot) + " outside the " +
                                              std::to_string(state.n_state_slots) + " slots");
    }
  }
}

inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Channels [c0, c1) of one sequence's n new tokens: x's rows are `stride`
// apart, its channel ch at x[t * stride + ch]; each becomes SiLU(bias + the
// conv). hist: the last taps - 1 inputs of each channel, rows of conv_dim
// (channel ch at hist[k * conv_dim + ch]), oldest first; read (unless
// fresh: zeros before position 0), then the last taps - 1 inputs of
// [hist, x] written back. w: [conv_dim, taps]; bias: [conv_dim] or null.
// Token by token over blocks of channels, so the taps and the SiLU run
// across contiguous channels (the vector ops' SiLU); the raw inputs the
// later tokens need stay in a ring of taps rows.
inline void causal_conv_rows(float* x, int64_t stride, int64_t n, float* hist, int64_t conv_dim, const float* w,
                             const float* bias, int64_t taps, bool fresh, int64_t c0, int64_t c1,
                             const VecOps& ops) {
  const int64_t h = taps - 1;
  float ring[kMaxConvTaps][kConvBlock];  // raw inputs t - h .. t, row (t + h) % taps holds t's
  float wt[kMaxConvTaps][kConvBlock];    // the taps, transposed
  float acc[kConvBlock];
  float ones[kConvBlock];
  std::fill(ones, ones + kConvBlock, 1.0f);
  for (int64_t b0 = c0; b0 < c1; b0 += kConvBlock) {
    const int64_t nb = std::min(kConvBlock, c1 - b0);
    for (int64_t k = 0; k < taps; ++k) {
      for (int64_t j = 0; j < nb; ++j) wt[k][j] = w[(b0 + j) * taps + k];
    }
    for (int64_t k = 0; k < h; ++k) {  // position -h + k into row k
      for (int64_t j = 0; j < nb; ++j) ring[k][j] = fresh ? 0.0f : hist[k * conv_dim + b0 + j];
    }
    for (int64_t t = 0; t < n; ++t) {
      float* row = x + t * stride + b0;
      float* in = ring[(t + h) % taps];
      std::copy(row, row + nb, in);
      for (int64_t j = 0; j < nb; ++j) acc[j] = bias != nullptr ? bias[b0 + j] : 0.0f;
      for (int64_t k = 0; k < taps; ++k) {  // tap k reads position t - h + k
        const float* r = ring[(t + k) % taps];
        for (int64_t j = 0; j < nb; ++j) acc[j] += wt[k][j] * r[j];
      }
      ops.swiglu(row, acc, ones, nb);  // silu(acc)
    }
    for (int64_t k = 0; k < h; ++k) {  // the last h positions, n - h + k, oldest first
      const float* r = ring[(n + k) % taps];
      for (int64_t j = 0; j < nb; ++j) hist[k * conv_dim + b0 + j] = r[j];
    }
  }
}

}  // namespace troupe::kernels::cpu
