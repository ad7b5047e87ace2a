// RoPE scaling schemes as per-pair frequency divisors and an attention
// factor: the forms ModelConfig keeps, whatever file they came from.
#include "model/rope_scaling.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace troupe {

std::vector<float> llama3_freq_factors(int64_t n_rot, double theta, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_max_position) {
  const double low_freq_wavelen = original_max_position / low_freq_factor;
  const double high_freq_wavelen = original_max_position / high_freq_factor;
  std::vector<float> out(static_cast<size_t>(n_rot / 2));
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
    const double wavelen = 2.0 * std::numbers::pi / inv_freq;
    double divisor = 1.0;
    if (wavelen > low_freq_wavelen) {
      divisor = factor;
    } else if (wavelen >= high_freq_wavelen) {
      // new = (1 - s) * inv / factor + s * inv, so the divisor is inv / new.
      const double s = (original_max_position / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      divisor = 1.0 / ((1.0 - s) / factor + s);
    }
    out[static_cast<size_t>(i)] = static_cast<float>(divisor);
  }
  return out;
}

namespace {

// The rotary pair index at which a wavelength makes num_rotations turns
// over the original context (YaRN's "correction dimension"), in pairs.
double yarn_correction_dim(double num_rotations, int64_t n_rot, double theta, double original_ctx) {
  return static_cast<double>(n_rot) * std::log(original_ctx / (num_rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(theta));
}

}  // namespace

std::vector<float> yarn_freq_factors(int64_t n_rot, double theta, const YarnParams& p) {
  double low = yarn_correction_dim(p.beta_fast, n_rot, theta, p.original_ctx);
  double high = yarn_correction_dim(p.beta_slow, n_rot, theta, p.original_ctx);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(n_rot - 1));
  if (low == high) high += 0.001;  // no singularity
  std::vector<float> out(static_cast<size_t>(n_rot / 2));
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    // ramp 0: the pair keeps its frequency (extrapolation); 1: divided by
    // factor (interpolation); ext_factor scales the share kept.
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double keep = (1.0 - ramp) * p.ext_factor;
    out[static_cast<size_t>(i)] = static_cast<float>(1.0 / (keep + (1.0 - keep) / p.factor));
  }
  return out;
}

double yarn_mscale(double factor, double mscale) { return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

}  // namespace troupe
