// The mxfp4 reference quantizer and the Hugging Face block conversion
// (core/dtype_mxfp4.hpp).
#include "core/dtype_mxfp4.hpp"

#include <algorithm>
#include <cmath>

#include "core/dtype.hpp"

namespace troupe {
namespace {

// The code whose level times d is nearest to x: the first of the lowest
// |level * d - x| in code order, each error rounded to f32 as ggml and
// gguf-py compute it (level * d is exact), so ties and near-ties break as
// theirs do: 0 takes code 0, not the -0 of code 8.
uint8_t nearest_mxfp4(float x, float d) {
  int best = 0;
  float best_err = std::fabs(static_cast<float>(kMxfp4Levels[0]) * d - x);
  for (int q = 1; q < 16; ++q) {
    const float err = std::fabs(static_cast<float>(kMxfp4Levels[q]) * d - x);
    if (err < best_err) {
      best = q;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best);
}

// FP4 code k (0..31) of the 16 bytes of a Hugging Face block.
uint8_t hf_code(const uint8_t* hf, int k) { return static_cast<uint8_t>((hf[k / 2] >> (4 * (k % 2))) & 0x0f); }

}  // namespace

void mxfp4_blocks_from_hf(const uint8_t* blocks, const uint8_t* scales, int64_t n_blocks, void* dst) {
  auto* b = static_cast<BlockMXFP4*>(dst);
  for (int64_t i = 0; i < n_blocks; ++i) {
    const uint8_t* hf = blocks + i * (kQK / 2);
    b[i].e = scales[i];
    for (int j = 0; j < kQK / 2; ++j) {
      b[i].qs[j] = static_cast<uint8_t>(hf_code(hf, j) | (hf_code(hf, j + kQK / 2) << 4));
    }
  }
}

namespace detail {

void quantize_row_mxfp4(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockMXFP4*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    // log2f as ggml calls it. Outside [2^-125, 2^130) the exponent leaves
    // E8M0's range, where ggml's cast is undefined: it is clamped.
    const float e = amax > 0.0f ? std::floor(std::log2(amax)) - 2.0f + 127.0f : 0.0f;
    b[i].e = static_cast<uint8_t>(std::clamp(e, 0.0f, 255.0f));
    const float d = mxfp4_scale(b[i].e);
    for (int j = 0; j < kQK / 2; ++j) {
      b[i].qs[j] = static_cast<uint8_t>(nearest_mxfp4(x[j], d) | (nearest_mxfp4(x[j + kQK / 2], d) << 4));
    }
  }
}

}  // namespace detail
}  // namespace troupe
