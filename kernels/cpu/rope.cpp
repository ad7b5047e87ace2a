// Rotary position embedding, in place on queries or keys. Pair i of a head
// turns by pos * freq_scale / (theta^(2i/n_rot) * freq_factors[i]); angles are
// formed in double so long positions keep their precision, and each token's
// cos/sin table is shared by all its heads.
#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe::kernels {

void rope(float* x, const int32_t* pos, int64_t n_tokens, int64_t n_head, int64_t head_dim, const RopeParams& p) {
  const int64_t n_rot = p.n_rot == 0 ? head_dim : p.n_rot;
  if (n_tokens < 0 || n_head <= 0 || head_dim <= 0 || n_rot <= 0 || n_rot > head_dim || n_rot % 2 != 0) {
    throw Error(Errc::invalid_argument, "rope: bad shape n_tokens=" + std::to_string(n_tokens) + " n_head=" +
                                            std::to_string(n_head) + " head_dim=" + std::to_string(head_dim) +
                                            " n_rot=" + std::to_string(n_rot) + " (n_rot must be even, <= head_dim)");
  }
  if (!(p.theta > 0.0f) || !std::isfinite(p.freq_scale)) {
    throw Error(Errc::invalid_argument,
                "rope: theta must be > 0 and freq_scale finite (theta=" + std::to_string(p.theta) +
                    ", freq_scale=" + std::to_string(p.freq_scale) + ")");
  }
  if (n_tokens == 0) return;
  if (x == nullptr || pos == nullptr) throw Error(Errc::invalid_argument, "rope: null x or pos");

  const int64_t half = n_rot / 2;
  // Per-thread scratch: sized once, then reused by every later call.
  thread_local std::vector<double> inv_freq;  // [half]
  thread_local std::vector<float> cs;         // [half][2]: cos, sin
  inv_freq.resize(static_cast<size_t>(half));
  cs.resize(static_cast<size_t>(2 * half));
  for (int64_t i = 0; i < half; ++i) {
    const double f = p.freq_factors != nullptr ? static_cast<double>(p.freq_factors[i]) : 1.0;
    inv_freq[i] =
        std::pow(static_cast<double>(p.theta), -2.0 * static_cast<double>(i) / static_cast<double>(n_rot)) / f;
  }

  for (int64_t t = 0; t < n_tokens; ++t) {
    const double scaled_pos = static_cast<double>(pos[t]) * static_cast<double>(p.freq_scale);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = scaled_pos * inv_freq[i];
      cs[2 * i] = static_cast<float>(std::cos(angle));
      cs[2 * i + 1] = static_cast<float>(std::sin(angle));
    }
    for (int64_t h = 0; h < n_head; ++h) {
      float* xh = x + (t * n_head + h) * head_dim;
      // normal pairs (2i, 2i+1); neox pairs (i, i + half). Dims >= n_rot pass through.
      const int64_t step = p.layout == RopeLayout::normal ? 2 : 1;
      const int64_t other = p.layout == RopeLayout::normal ? 1 : half;
      for (int64_t i = 0; i < half; ++i) {
        float* a = xh + i * step;
        float* b = a + other;
        const float c = cs[2 * i];
        const float s = cs[2 * i + 1];
        const float x0 = *a;
        const float x1 = *b;
        *a = x0 * c - x1 * s;
        *b = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace troupe::kernels
