// RMSNorm (Llama, Qwen, Mistral) and LayerNorm (GPT-2): one row per token,
// reductions and the scale-and-shift on the active ISA's vector primitives.
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "kernels/cpu/vec_ops.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe::kernels {
namespace {

void check_norm_args(const char* name, const float* x, const float* y, const float* weight, int64_t n_tokens,
                     int64_t n_embd) {
  if (n_tokens < 0 || n_embd <= 0) {
    throw Error(Errc::invalid_argument, std::string(name) + ": bad shape n_tokens=" + std::to_string(n_tokens) +
                                            " n_embd=" + std::to_string(n_embd));
  }
  if (n_tokens > 0 && (x == nullptr || y == nullptr || weight == nullptr)) {
    throw Error(Errc::invalid_argument, std::string(name) + ": null input, output or weight");
  }
}

}  // namespace

void rmsnorm(float* y, const float* x, const float* weight, int64_t n_tokens, int64_t n_embd, float eps) {
  check_norm_args("rmsnorm", x, y, weight, n_tokens, n_embd);
  const cpu::VecOps& ops = cpu::vec_ops();
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * n_embd;
    const float mean_sq = ops.sum_sq_diff(xt, 0.0f, n_embd) / static_cast<float>(n_embd);
    const float inv_rms = 1.0f / std::sqrt(mean_sq + eps);
    ops.norm_apply(y + t * n_embd, xt, 0.0f, inv_rms, weight, nullptr, n_embd);
  }
}

void layernorm(float* y, const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t n_embd,
               float eps) {
  check_norm_args("layernorm", x, y, weight, n_tokens, n_embd);
  const cpu::VecOps& ops = cpu::vec_ops();
  const float inv_n = 1.0f / static_cast<float>(n_embd);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x + t * n_embd;
    // Two passes (mean, then squared deviations) rather than E[x^2] - E[x]^2,
    // which cancels badly when the mean is large against the spread.
    const float mean = ops.sum(xt, n_embd) * inv_n;
    const float var = ops.sum_sq_diff(xt, mean, n_embd) * inv_n;
    ops.norm_apply(y + t * n_embd, xt, mean, 1.0f / std::sqrt(var + eps), weight, bias, n_embd);
  }
}

}  // namespace troupe::kernels
