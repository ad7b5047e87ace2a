// RoPE scaling schemes turned into what ModelConfig keeps: per-pair
// frequency divisors (rope_freq_factors, [n_rot / 2]) and an attention
// factor (rope_mscale). Shared by the Hugging Face and GGUF readers.
#pragma once

#include <cstdint>
#include <vector>

namespace troupe {

// Llama 3.1's divisors, as transformers' _compute_llama3_parameters derives
// them: high frequencies (wavelength below original_max_position /
// high_freq_factor) are kept, low ones (above original_max_position /
// low_freq_factor) divided by `factor`, and those in between interpolated
// smoothly.
std::vector<float> llama3_freq_factors(int64_t n_rot, double theta, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_max_position);

struct YarnParams {
  double factor = 1.0;        // context extension
  double original_ctx = 0.0;  // the context the model was trained at
  double beta_fast = 32.0;    // pairs turning more than this over original_ctx keep their frequency
  double beta_slow = 1.0;     // pairs turning less than this are divided by factor
  bool truncate = true;       // round the ramp's ends outward (transformers' default, llama.cpp always)
  double ext_factor = 1.0;    // llama.cpp's yarn_ext_factor: how much of the kept share is kept
};

// YaRN's divisors, as transformers' _compute_yarn_parameters and ggml's
// rope_yarn blend them: pair i keeps its frequency below the ramp, is
// divided by factor above it, and is interpolated linearly between.
std::vector<float> yarn_freq_factors(int64_t n_rot, double theta, const YarnParams& p);

// YaRN's attention factor for a scale: 0.1 * mscale * ln(factor) + 1 (1 when
// factor <= 1).
double yarn_mscale(double factor, double mscale = 1.0);

}  // namespace troupe
