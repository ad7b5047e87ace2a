// The int8 path of matmul (quantized activations; VNNI GEMV and GEMM, AMX
// GEMM where present) for every quantized weight type.
//
// Two references, both in double precision over the exactly dequantized
// weights:
// - the activations quantized as the path specifies (blocks of 32,
//   d = absmax / 127, q = x * (127 / absmax) rounded to nearest even), which
//   it must match to f32 rounding: |y - ref| <= 1e-5 * sum_i |w_i d q_i|, as
//   in matmul_test.cpp;
// - the f32 activations, from which it may differ by at most the
//   quantization error: |y - ref| <= sum_i |w_i| d_i / 2 (each q_i is off by
//   at most half a step), plus the same rounding term.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/dtype.hpp"
#include "core/thread_pool.hpp"
#include "int8_reference.hpp"
#include "isa_paths.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe {
namespace {

using test::AmxSwitch;
using test::expected;
using test::Expected;
using test::int8_path_runs;
using test::kRelTol;
using test::make_weights;
using test::Weights;


class MatmulInt8 : public testing::TestWithParam<DType> {};


TEST_P(MatmulInt8, MatchesQuantizedActivationsAndStaysWithinTheirError) {
  if (!int8_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: matmul keeps f32 activations";
  const DType t = GetParam();
  std::mt19937 rng(4321 + static_cast<unsigned>(t));
  ThreadPool pool(2);
  const bool kquant = dtype_info(t).block_size == kQK_K;
  // 32 and 96: an odd number of blocks (a single chunk at the end of a row).
  const std::vector<int64_t> n_ins = kquant ? std::vector<int64_t>{256, 768, 4096} : std::vector<int64_t>{32, 96, 4096};
  for (int64_t n_in : n_ins) {
    for (int64_t n_out : {5, 101}) {  // 101: partial 16-row panels and 4-row tiles
      const Weights w = make_weights(rng, t, n_out, n_in);
      for (int64_t n_tokens : {1, 3, 6, 17, 40}) {  // GEMV groups; GEMM token tiles of 8 / 16 and their tails
        const std::vector<float> x = test::int8_inputs(rng, n_tokens, n_in);
        const Expected e = expected(x, w, n_tokens, n_in, n_out);
        for (bool amx : test::amx_settings()) {
          const AmxSwitch use_amx(amx);
          std::vector<float> y(static_cast<size_t>(n_tokens * n_out), std::nanf(""));
          kernels::matmul(y.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool);
          test::expect_int8_result(y, e, n_out, std::string(dtype_name(t)) + (amx ? " amx" : " vnni") + " n_tokens " +
                                                    std::to_string(n_tokens) + " n_in " + std::to_string(n_in) +
                                                    " n_out " + std::to_string(n_out));
        }
      }
    }
  }
}

// Rows go to threads in whole units and each is computed the same way by
// whichever thread owns it; the AMX and VNNI GEMMs form the same integer
// sums and scale them in the same order, so they agree bit for bit.
TEST_P(MatmulInt8, SameBitsForAnyThreadCountAndWithOrWithoutAmx) {
  if (!int8_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: matmul keeps f32 activations";
  const DType t = GetParam();
  std::mt19937 rng(17 + static_cast<unsigned>(t));
  const int64_t n_in = 512, n_out = 301;
  const Weights w = make_weights(rng, t, n_out, n_in);
  ThreadPool pool1(1), pool2(2), pool3(3);
  for (int64_t n_tokens : {1, 6, 20, 37}) {
    const std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_tokens * n_in), -1.0f, 1.0f);
    std::vector<float> first;
    for (bool amx : test::amx_settings()) {
      const AmxSwitch use_amx(amx);
      std::vector<float> y1(static_cast<size_t>(n_tokens * n_out)), y2(y1.size()), y3(y1.size());
      kernels::matmul(y1.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool1);
      kernels::matmul(y2.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool2);
      kernels::matmul(y3.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool3);
      EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)))
          << dtype_name(t) << " n_tokens " << n_tokens << (amx ? " amx" : "") << ": 1 vs 2 threads";
      EXPECT_EQ(0, std::memcmp(y1.data(), y3.data(), y1.size() * sizeof(float)))
          << dtype_name(t) << " n_tokens " << n_tokens << (amx ? " amx" : "") << ": 1 vs 3 threads";
      if (first.empty()) {
        first = y1;
      } else {
        EXPECT_EQ(0, std::memcmp(first.data(), y1.data(), y1.size() * sizeof(float)))
            << dtype_name(t) << " n_tokens " << n_tokens << ": AMX and VNNI differ";
      }
    }
  }
}

// Exact math turns the int8 path off: the result is then the f32 path's.
TEST_P(MatmulInt8, ExactMathGivesTheF32Path) {
  if (!int8_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: matmul keeps f32 activations";
  const DType t = GetParam();
  std::mt19937 rng(5 + static_cast<unsigned>(t));
  const int64_t n_in = 256, n_out = 20, n_tokens = 3;
  const Weights w = make_weights(rng, t, n_out, n_in);
  const std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_tokens * n_in), -1.0f, 1.0f);
  ThreadPool pool(1);
  std::vector<float> int8(static_cast<size_t>(n_tokens * n_out)), exact(int8.size()), f32(int8.size());
  kernels::matmul(int8.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool);
  {
    const test::ExactMath on;
    kernels::matmul(exact.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool);
  }
  kernels::matmul(f32.data(), x.data(), w.deq.data(), DType::f32, n_tokens, n_in, n_out, pool);
  for (size_t i = 0; i < f32.size(); ++i) {
    EXPECT_NEAR(exact[i], f32[i], 1e-4 * (1 + std::abs(f32[i])));
  }
  EXPECT_NE(0, std::memcmp(int8.data(), exact.data(), int8.size() * sizeof(float))) << "int8 path did not run";
}

INSTANTIATE_TEST_SUITE_P(QuantTypes, MatmulInt8, testing::ValuesIn(test::kInt8Types),
                         [](const testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

}  // namespace
}  // namespace troupe
