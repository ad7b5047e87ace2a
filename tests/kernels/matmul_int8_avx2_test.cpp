// The int8 path on CPUs with AVX2 and no AVX-512 VNNI (matmul_int8_avx2.cpp),
// forced on whatever x86 CPU runs the test: every quantized weight type
// against the two references of matmul_int8_test.cpp, and, where the CPU
// also has AVX-512 VNNI, against the VNNI GEMV bit for bit.
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

using test::ForcedIsa;

class MatmulInt8Avx2 : public testing::TestWithParam<DType> {};

TEST_P(MatmulInt8Avx2, DecodeMatchesQuantizedActivationsAndStaysWithinTheirError) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "this CPU has no AVX2";
  const DType t = GetParam();
  std::mt19937 rng(977 + static_cast<unsigned>(t));
  ThreadPool pool(2);
  const ForcedIsa avx2(Isa::avx2);
  for (int64_t n_in : test::int8_row_lengths(t)) {
    for (int64_t n_out : {5, 101}) {  // 101: partial 4-row tiles and row units
      const test::Weights w = test::make_weights(rng, t, n_out, n_in);
      for (int64_t n_tokens : {1, 2, 3, 4, 7}) {  // each tile shape, and a group of 4 with a tail of 3
        const std::vector<float> x = test::int8_inputs(rng, n_tokens, n_in);
        const test::Expected e = test::expected(x, w, n_tokens, n_in, n_out);
        std::vector<float> y(static_cast<size_t>(n_tokens * n_out), std::nanf(""));
        kernels::matmul(y.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool);
        test::expect_int8_result(y, e, n_out, std::string(dtype_name(t)) + " avx2 n_tokens " +
                                                  std::to_string(n_tokens) + " n_in " + std::to_string(n_in) +
                                                  " n_out " + std::to_string(n_out));
      }
    }
  }
}

// A step of 8 tokens or more keeps the exact f32 GEMM, unless batch-invariant
// math asks every step for the decode's arithmetic: then a token's result
// does not depend on how many share its step.
TEST_P(MatmulInt8Avx2, BatchInvariantPrefillHasEachTokensDecodeBits) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "this CPU has no AVX2";
  const DType t = GetParam();
  std::mt19937 rng(31 + static_cast<unsigned>(t));
  ThreadPool pool(2);
  const ForcedIsa avx2(Isa::avx2);
  const test::BatchInvariantMath invariant;
  const int64_t n_in = test::int8_row_lengths(t)[1], n_out = 37, n_tokens = 19;
  const test::Weights w = test::make_weights(rng, t, n_out, n_in);
  const std::vector<float> x = test::int8_inputs(rng, n_tokens, n_in);
  std::vector<float> batch(static_cast<size_t>(n_tokens * n_out));
  kernels::matmul(batch.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool);
  for (int64_t tok = 0; tok < n_tokens; ++tok) {
    std::vector<float> one(static_cast<size_t>(n_out));
    kernels::matmul(one.data(), x.data() + tok * n_in, w.bytes.data(), t, 1, n_in, n_out, pool);
    EXPECT_EQ(0, std::memcmp(one.data(), batch.data() + tok * n_out, one.size() * sizeof(float)))
        << dtype_name(t) << " token " << tok;
  }
  const test::Expected e = test::expected(x, w, n_tokens, n_in, n_out);
  test::expect_int8_result(batch, e, n_out, std::string(dtype_name(t)) + " avx2 batch-invariant prefill");
}

// The AVX2 GEMV forms vpdpbusd's lane sums in two steps and repeats the VNNI
// GEMV's f32 operations lane for lane, reduction included.
TEST_P(MatmulInt8Avx2, SameBitsAsTheVnniGemv) {
  if (!test::int8_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI to compare with";
  const DType t = GetParam();
  std::mt19937 rng(5 + static_cast<unsigned>(t));
  ThreadPool pool(2);
  for (int64_t n_in : test::int8_row_lengths(t)) {
    const int64_t n_out = 53;
    const test::Weights w = test::make_weights(rng, t, n_out, n_in);
    for (int64_t n_tokens : {1, 2, 3, 5}) {
      const std::vector<float> x = test::int8_inputs(rng, n_tokens, n_in);
      std::vector<float> vnni(static_cast<size_t>(n_tokens * n_out)), avx2(vnni.size());
      {
        const ForcedIsa isa(Isa::avx512);
        kernels::matmul(vnni.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool);
      }
      {
        const ForcedIsa isa(Isa::avx2);
        kernels::matmul(avx2.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool);
      }
      for (size_t i = 0; i < vnni.size(); ++i) {
        uint32_t a, b;
        std::memcpy(&a, &vnni[i], sizeof a);
        std::memcpy(&b, &avx2[i], sizeof b);
        ASSERT_EQ(a, b) << dtype_name(t) << " n_in " << n_in << " n_tokens " << n_tokens << " output " << i
                        << ": vnni " << vnni[i] << ", avx2 " << avx2[i];
      }
    }
  }
}

// Exact math keeps f32 activations on the AVX2 path too.
TEST(MatmulInt8Avx2Exact, ExactMathKeepsTheF32Gemv) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "this CPU has no AVX2";
  std::mt19937 rng(11);
  ThreadPool pool(1);
  const ForcedIsa avx2(Isa::avx2);
  const test::ExactMath exact;
  const int64_t n_in = 512, n_out = 9;
  const test::Weights w = test::make_weights(rng, DType::q4_K, n_out, n_in);
  const std::vector<float> x = test::int8_inputs(rng, 1, n_in);
  std::vector<float> y(static_cast<size_t>(n_out));
  kernels::matmul(y.data(), x.data(), w.bytes.data(), DType::q4_K, 1, n_in, n_out, pool);
  for (int64_t r = 0; r < n_out; ++r) {
    double want = 0, scale = 0;
    for (int64_t i = 0; i < n_in; ++i) {
      const double p = double(w.deq[r * n_in + i]) * x[i];
      want += p, scale += std::abs(p);
    }
    EXPECT_NEAR(y[r], want, test::kRelTol * scale) << "row " << r;
  }
}

std::string type_name(const testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); }

INSTANTIATE_TEST_SUITE_P(Types, MatmulInt8Avx2, testing::ValuesIn(test::kInt8Types), type_name);

}  // namespace
}  // namespace troupe
