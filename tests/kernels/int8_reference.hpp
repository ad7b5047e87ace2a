// Shared by the matmul tests: weights with their exact dequantization, and
// the two references of the int8 path (see matmul_int8_test.cpp) with the
// check of a result against them.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "core/cpu_features.hpp"
#include "core/dtype.hpp"
#include "isa_paths.hpp"
#include "tests/exact_math.hpp"

namespace troupe::test {

constexpr double kRelTol = 1e-5;

inline const DType kInt8Types[] = {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0,   DType::q5_1,  DType::q2_K,
                                   DType::q3_K, DType::q4_K, DType::q5_K, DType::q6_K, DType::iq4_nl, DType::iq4_xs,
                                   DType::mxfp4};

// The VNNI kernels, then (where the CPU has AMX) the AMX GEMM.
inline std::vector<bool> amx_settings() {
  std::vector<bool> out{false};
  if (cpu_has_amx()) out.push_back(true);
  return out;
}

// The int8 kernels run when the AVX-512 path has VNNI and exact math is off.
inline bool int8_path_runs() { return isa_supported(Isa::avx512) && cpu_has_avx512_vnni(); }

// Whether matmul_int8_packed runs the bf16 AMX prefill for this call.
inline bool packed_prefill_is_bf16(bool amx, int64_t n_tokens) {
  return amx && n_tokens >= 16 && cpu_has_avx512_bf16();
}


struct Weights {
  std::vector<uint8_t> bytes;
  std::vector<float> deq;
};

inline Weights make_weights(std::mt19937& rng, DType t, int64_t n_out, int64_t n_in) {
  const std::vector<float> src = test::random_floats(rng, static_cast<size_t>(n_out * n_in), -1.0f, 1.0f);
  const int64_t rb = row_bytes(t, n_in);
  Weights w;
  w.bytes.resize(static_cast<size_t>(n_out * rb));
  w.deq.resize(src.size());
  for (int64_t r = 0; r < n_out; ++r) {
    quantize_row(t, src.data() + r * n_in, w.bytes.data() + r * rb, n_in);
    dequantize_row(t, w.bytes.data() + r * rb, w.deq.data() + r * n_in, n_in);
  }
  return w;
}

// Activations for the int8 path's tests: uniform in [-1, 1], every 64th
// input 9x larger (blocks of very different size) and the first block of
// 32 all zero.
inline std::vector<float> int8_inputs(std::mt19937& rng, int64_t n_tokens, int64_t n_in) {
  std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_tokens * n_in), -1.0f, 1.0f);
  for (int64_t i = 0; i < n_tokens * n_in; i += 64) x[static_cast<size_t>(i)] *= 9.0f;
  std::fill(x.begin(), x.begin() + 32, 0.0f);
  return x;
}

// Row lengths for the AVX2 kernels' tests: 32 and 96 give an odd number of
// 32-input blocks (a last chunk or unit pair with no partner).
inline std::vector<int64_t> int8_row_lengths(DType t) {
  return dtype_info(t).block_size == kQK_K ? std::vector<int64_t>{256, 768, 2816} : std::vector<int64_t>{32, 96, 4096};
}

// x with each block of 32 replaced by d * q, and d per element.
struct QuantizedX {
  std::vector<float> xq;
  std::vector<float> step;
};

inline QuantizedX quantize_like_the_path(const std::vector<float>& x) {
  QuantizedX out{std::vector<float>(x.size()), std::vector<float>(x.size())};
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::abs(x[i]));
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    const float d = amax / 127.0f;
    for (size_t i = b; i < b + 32; ++i) {
      out.xq[i] = d * std::nearbyint(x[i] * id);
      out.step[i] = d;
    }
  }
  return out;
}

struct Expected {
  std::vector<double> y_q, scale_q;  // against the quantized activations
  std::vector<double> y, bound;      // against f32 activations, with the bound
  std::vector<double> abs_sum;       // sum |x w| over the row, for the bf16 bound
  int64_t n_in = 0;
};

inline Expected expected(const std::vector<float>& x, const Weights& w, int64_t n_tokens, int64_t n_in, int64_t n_out) {
  const QuantizedX qx = quantize_like_the_path(x);
  Expected e;
  const size_t n = static_cast<size_t>(n_tokens * n_out);
  e.y_q.resize(n), e.scale_q.resize(n), e.y.resize(n), e.bound.resize(n), e.abs_sum.resize(n);
  e.n_in = n_in;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_out; ++r) {
      double yq = 0, sq = 0, y = 0, s = 0, qerr = 0;
      for (int64_t i = 0; i < n_in; ++i) {
        const double wi = w.deq[r * n_in + i];
        const double pq = wi * qx.xq[t * n_in + i];
        const double p = wi * x[t * n_in + i];
        yq += pq, sq += std::abs(pq), y += p, s += std::abs(p);
        qerr += std::abs(wi) * qx.step[t * n_in + i] / 2;
      }
      const size_t k = static_cast<size_t>(t * n_out + r);
      e.y_q[k] = yq, e.scale_q[k] = sq, e.y[k] = y;
      e.bound[k] = qerr + kRelTol * s;
      e.abs_sum[k] = s;
    }
  }
  return e;
}

// Checks y [n_tokens, n_out] against both references; reports at most 5
// outputs, each with `what` (the type, path and shape).
inline void expect_int8_result(const std::vector<float>& y, const Expected& e, int64_t n_out, const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < y.size() && bad < 5; ++i) {
    const double err_q = std::abs(double(y[i]) - e.y_q[i]);
    const double err = std::abs(double(y[i]) - e.y[i]);
    if (!(err_q <= kRelTol * e.scale_q[i]) || !(err <= e.bound[i])) {
      ++bad;
      ADD_FAILURE() << what << " token " << i / static_cast<size_t>(n_out) << " row " << i % static_cast<size_t>(n_out)
                    << ": got " << y[i] << ", want " << e.y_q[i] << " (scale " << e.scale_q[i]
                    << "), f32 activations " << e.y[i] << " (bound " << e.bound[i] << ")";
    }
  }
}

// The AMX prefill over repacked weights (bf16_packed.hpp,
// int8_packed_gemm_bf16) rounds activations and weights to bf16 (unit
// roundoff 2^-8 each; the weight is formed with one f32 fma first) and
// accumulates in f32: checks y against the product with f32 activations.
inline void expect_bf16_result(const std::vector<float>& y, const Expected& e, int64_t n_out, const std::string& what) {
  const double u = std::ldexp(1.0, -8);
  const double rounding = 2 * u + u * u + std::ldexp(1.0, -22);
  const double accumulate = double(e.n_in + 1) * std::ldexp(1.0, -24) * (1 + 2 * u);
  int bad = 0;
  for (size_t i = 0; i < y.size() && bad < 5; ++i) {
    const double bound = (rounding + accumulate) * e.abs_sum[i];
    if (!(std::abs(double(y[i]) - e.y[i]) <= bound)) {
      ++bad;
      ADD_FAILURE() << what << " token " << i / static_cast<size_t>(n_out) << " row " << i % static_cast<size_t>(n_out)
                    << ": got " << y[i] << ", want " << e.y[i] << " (bf16 bound " << bound << ")";
    }
  }
}

}  // namespace troupe::test
