// Per-ISA vector primitives behind the CPU norms, activations, softmax and
// attention. Each ISA file (vec_ops*.cpp) fills one table of plain function
// pointers; a kernel fetches the table for active_isa() once per call.
#pragma once

#include <cstdint>

#include "core/cpu_features.hpp"

namespace troupe::kernels::cpu {

struct VecOps {
  // Sum of x[i].
  float (*sum)(const float* x, int64_t n);
  // Sum of (x[i] - c)^2: variance numerators and, with c = 0, RMS.
  float (*sum_sq_diff)(const float* x, float c, int64_t n);
  // y[i] = (x[i] - c) * s * w[i] (+ b[i] when b is not null). y may alias x.
  void (*norm_apply)(float* y, const float* x, float c, float s, const float* w, const float* b, int64_t n);
  float (*max)(const float* x, int64_t n);
  // x[i] = exp(x[i] - c); returns the sum of the new values.
  float (*exp_sum)(float* x, float c, int64_t n);
  // x[i] *= s.
  void (*scale)(float* x, float s, int64_t n);
  // y[i] = silu(g[i]) * u[i]. y may alias g or u.
  void (*swiglu)(float* y, const float* g, const float* u, int64_t n);
  // y[i] = gelu_tanh(x[i]). y may alias x.
  void (*gelu)(float* y, const float* x, int64_t n);
  // y[i] = x[i] * Phi(x[i]), the exact (erf) GELU of BERT's "gelu". y may
  // alias x.
  void (*gelu_erf)(float* y, const float* x, int64_t n);

  // Attention tiles over n keys/values laid out `stride` floats apart (one
  // kv head of consecutive slots of a paged block), each of d floats:
  //   s[j] = scale * (q . k_j)                      for j < n
  //   acc  = acc * c + sum_j p[j] * v_j
  void (*dot_tile)(float* s, const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float scale);
  void (*acc_tile)(float* acc, float c, const float* p, const float* v, int64_t stride, int64_t n, int64_t d);
};

const VecOps& vec_ops_scalar();
// These return the scalar table when the compiler cannot target the ISA.
const VecOps& vec_ops_avx2();
const VecOps& vec_ops_avx512();
const VecOps& vec_ops(Isa isa);
// The table for active_isa().
const VecOps& vec_ops();

}  // namespace troupe::kernels::cpu
