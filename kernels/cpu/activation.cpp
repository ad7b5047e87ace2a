// Elementwise activations (SwiGLU's silu(gate) * up, GPT-2's tanh GELU) and
// the row softmax, on the active ISA's vector primitives.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "kernels/cpu/vec_ops.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe::kernels {
namespace {

void check_n(const char* name, int64_t n) {
  if (n < 0) throw Error(Errc::invalid_argument, std::string(name) + ": negative length " + std::to_string(n));
}

}  // namespace

void swiglu(float* y, const float* gate, const float* up, int64_t n) {
  check_n("swiglu", n);
  cpu::vec_ops().swiglu(y, gate, up, n);
}

// Scalar: the experts' rows are narrow (gpt-oss: 2880 values a token), and
// this runs once per expert on the rows routed to it.
void swiglu_oai(float* y, const float* gate, const float* up, int64_t n, float alpha, float limit) {
  check_n("swiglu_oai", n);
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    y[i] = (u + 1.0f) * (g / (1.0f + std::exp(-alpha * g)));
  }
}

void gelu(float* y, const float* x, int64_t n) {
  check_n("gelu", n);
  cpu::vec_ops().gelu(y, x, n);
}

void gelu_erf(float* y, const float* x, int64_t n) {
  check_n("gelu_erf", n);
  cpu::vec_ops().gelu_erf(y, x, n);
}

// Subtracting the max keeps exp() in range. A row of all -inf has no
// distribution and comes out NaN, as in PyTorch.
void softmax(float* x, int64_t n) {
  check_n("softmax", n);
  if (n == 0) return;
  const cpu::VecOps& ops = cpu::vec_ops();
  const float m = ops.max(x, n);
  const float s = ops.exp_sum(x, m, n);
  ops.scale(x, 1.0f / s, n);
}

}  // namespace troupe::kernels
