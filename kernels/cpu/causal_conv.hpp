// The causal depthwise conv of the recurrent layers (Gated DeltaNet, Mamba-2)
// over one channel of one sequence, its history in the sequence's state slot.
#pragma once

#include <cmath>
#include <cstdint>

namespace troupe::kernels::cpu {

inline constexpr int64_t kMaxConvTaps = 16;

// x: the channel's n new inputs, stride apart; becomes SiLU(bias + the conv)
// in place (last to first, so each output reads inputs not yet overwritten).
// hist: the channel's last taps - 1 inputs, hist_stride apart, oldest first;
// read (unless fresh: zeros before position 0), then the last taps - 1 of
// [hist, x] written back.
inline void causal_conv_channel(float* x, int64_t stride, int64_t n, float* hist, int64_t hist_stride,
                                const float* w, float bias, int64_t taps, bool fresh) {
  const int64_t h = taps - 1;
  float old[kMaxConvTaps];
  for (int64_t k = 0; k < h; ++k) old[k] = fresh ? 0.0f : hist[k * hist_stride];
  auto input = [&](int64_t t) { return t < 0 ? old[h + t] : x[t * stride]; };  // t >= -h
  float next[kMaxConvTaps];
  for (int64_t k = 0; k < h; ++k) next[k] = input(n - h + k);
  for (int64_t t = n - 1; t >= 0; --t) {
    float acc = bias;
    for (int64_t k = 0; k < taps; ++k) acc += w[k] * input(t - h + k);
    x[t * stride] = acc / (1.0f + std::exp(-acc));
  }
  for (int64_t k = 0; k < h; ++k) hist[k * hist_stride] = next[k];
}

}  // namespace troupe::kernels::cpu
