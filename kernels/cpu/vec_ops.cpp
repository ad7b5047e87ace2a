// The portable (scalar) vector primitives and the ISA dispatch. These loops
// are the behaviour the SIMD tables are tested against; they keep several
// partial sums so the compiler can still use SSE and the sums round less.
#include "kernels/cpu/vec_ops.hpp"

#include <cmath>

namespace troupe::kernels::cpu {
namespace {

constexpr int kVecLanes = 8;

float sum(const float* x, int64_t n) {
  float part[kVecLanes] = {};
  int64_t i = 0;
  for (; i + kVecLanes <= n; i += kVecLanes) {
    for (int l = 0; l < kVecLanes; ++l) part[l] += x[i + l];
  }
  float s = 0.0f;
  for (; i < n; ++i) s += x[i];
  for (float p : part) s += p;
  return s;
}

float sum_sq_diff(const float* x, float c, int64_t n) {
  float part[kVecLanes] = {};
  int64_t i = 0;
  for (; i + kVecLanes <= n; i += kVecLanes) {
    for (int l = 0; l < kVecLanes; ++l) {
      const float d = x[i + l] - c;
      part[l] += d * d;
    }
  }
  float s = 0.0f;
  for (; i < n; ++i) s += (x[i] - c) * (x[i] - c);
  for (float p : part) s += p;
  return s;
}

void norm_apply(float* y, const float* x, float c, float s, const float* w, const float* b, int64_t n) {
  if (b != nullptr) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - c) * s * w[i] + b[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - c) * s * w[i];
  }
}

float max(const float* x, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

float exp_sum(float* x, float c, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - c);
    s += x[i];
  }
  return s;
}

void scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void swiglu(float* y, const float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void gelu(float* y, const float* x, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

void gelu_erf(float* y, const float* x, int64_t n) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  for (int64_t i = 0; i < n; ++i) y[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

float dot(const float* a, const float* b, int64_t d) {
  float part[kVecLanes] = {};
  int64_t i = 0;
  for (; i + kVecLanes <= d; i += kVecLanes) {
    for (int l = 0; l < kVecLanes; ++l) part[l] += a[i + l] * b[i + l];
  }
  float s = 0.0f;
  for (; i < d; ++i) s += a[i] * b[i];
  for (float p : part) s += p;
  return s;
}

void dot_tile(float* s, const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float sc) {
  for (int64_t j = 0; j < n; ++j) s[j] = sc * dot(q, k + j * stride, d);
}

void acc_tile(float* acc, float c, const float* p, const float* v, int64_t stride, int64_t n, int64_t d) {
  for (int64_t i = 0; i < d; ++i) acc[i] *= c;
  for (int64_t j = 0; j < n; ++j) {
    const float pj = p[j];
    const float* vj = v + j * stride;
    for (int64_t i = 0; i < d; ++i) acc[i] += pj * vj[i];
  }
}

const VecOps kScalar{
    .sum = sum,
    .sum_sq_diff = sum_sq_diff,
    .norm_apply = norm_apply,
    .max = max,
    .exp_sum = exp_sum,
    .scale = scale,
    .swiglu = swiglu,
    .gelu = gelu,
    .gelu_erf = gelu_erf,
    .dot_tile = dot_tile,
    .acc_tile = acc_tile,
};

}  // namespace

const VecOps& vec_ops_scalar() { return kScalar; }

const VecOps& vec_ops(Isa isa) {
  switch (isa) {
    case Isa::avx512: return vec_ops_avx512();
    case Isa::avx2: return vec_ops_avx2();
    case Isa::scalar: break;
  }
  return kScalar;
}

const VecOps& vec_ops() { return vec_ops(active_isa()); }

}  // namespace troupe::kernels::cpu
