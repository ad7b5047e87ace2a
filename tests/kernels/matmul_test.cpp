// matmul on every SIMD path this CPU runs, for every weight dtype, under
// exact math, against a naive reference: dequantize_row (core/dtype, itself
// checked against the `gguf` package) and double-precision dot products. The
// int8 path (quantized activations) is matmul_int8_test.cpp.
//
// Tolerance: |y - ref| <= 1e-5 * sum_i |w_i x_i|. The kernels accumulate in
// f32 with at least 8 partial sums (SIMD lanes), so each output is a sum of
// n_in / 8 + O(log) rounded additions; the classic bound is that many units
// of f32 rounding (2^-24) times sum |w_i x_i|, i.e. about 3e-5 for n_in =
// 4096, and the expected (random-walk) error is ~sqrt(n_in / 8) * 2^-24, about
// 1.4e-6 (the worst seen here is ~1e-7). Dequantization is exact, so the same
// bound holds for every dtype.
// sum |w_i x_i| rather than |ref| is the scale because outputs may cancel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "int8_reference.hpp"
#include "isa_paths.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe {
namespace {

using test::kRelTol;

using test::make_weights;
using test::Weights;

struct Reference {
  std::vector<double> y;      // [n_tokens, n_out]
  std::vector<double> scale;  // sum_i |w_i x_i| per output
};

Reference reference(const std::vector<float>& x, const std::vector<float>& w, int64_t n_tokens, int64_t n_in,
                    int64_t n_out) {
  Reference ref;
  ref.y.resize(static_cast<size_t>(n_tokens * n_out));
  ref.scale.resize(ref.y.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_out; ++r) {
      double s = 0, a = 0;
      for (int64_t i = 0; i < n_in; ++i) {
        const double p = double(x[t * n_in + i]) * double(w[r * n_in + i]);
        s += p;
        a += std::abs(p);
      }
      ref.y[t * n_out + r] = s;
      ref.scale[t * n_out + r] = a;
    }
  }
  return ref;
}

const DType kAllTypes[] = {DType::f32,  DType::f16,  DType::bf16, DType::q8_0, DType::q4_0,
                           DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_K, DType::q3_K,
                           DType::q4_K, DType::q5_K, DType::q6_K, DType::iq4_nl, DType::iq4_xs,
                           DType::mxfp4};

class MatmulByType : public testing::TestWithParam<DType> {};

TEST_P(MatmulByType, MatchesReferenceOnEveryIsa) {
  const DType t = GetParam();
  const test::ExactMath exact;
  std::mt19937 rng(1234 + static_cast<unsigned>(t));
  ThreadPool pool(2);
  const int64_t block = dtype_info(t).block_size;
  // k-quants: 1, 3 and 16 super-blocks (768: a K block of the prefill
  // panel is not a multiple of it; 4096: several K blocks).
  std::vector<int64_t> n_ins = block == kQK_K ? std::vector<int64_t>{256, 768, 4096} : std::vector<int64_t>{32, 96, 4096};
  if (!is_quantized(t)) n_ins.push_back(1101);  // a tail after the 32-wide chunks and after a K block
  for (int64_t n_in : n_ins) {
    for (int64_t n_out : {5, 101}) {  // 101 = two 48-row units + 5: no tile size divides it
      const Weights w = make_weights(rng, t, n_out, n_in);
      for (int64_t n_tokens : {1, 3, 6, 17, 64}) {  // 6: two GEMV token groups (4 + 2)
        const std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_tokens * n_in), -1.0f, 1.0f);
        const Reference ref = reference(x, w.deq, n_tokens, n_in, n_out);
        for (Isa isa : test::runnable_isas()) {
          test::ForcedIsa forced(isa);
          std::vector<float> y(static_cast<size_t>(n_tokens * n_out), std::nanf(""));
          kernels::matmul(y.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool);
          int bad = 0;
          for (size_t i = 0; i < y.size() && bad < 5; ++i) {
            const double err = std::abs(double(y[i]) - ref.y[i]);
            if (!(err <= kRelTol * ref.scale[i])) {
              ++bad;
              ADD_FAILURE() << dtype_name(t) << " " << isa_name(isa) << " n_tokens " << n_tokens << " n_in " << n_in
                            << " n_out " << n_out << " token " << i / n_out << " row " << i % n_out << ": got "
                            << y[i] << ", want " << ref.y[i] << " (scale " << ref.scale[i] << ")";
            }
          }
        }
      }
    }
  }
}

// Batch-invariant math: a token's row of a 45-token step (the GEMM's size)
// or a 13-token one (GEMV groups of 4) has the bits of the token alone (a
// decode), on every ISA, for the float path exact math takes.
TEST_P(MatmulByType, BatchInvariantStepsHaveEachTokensDecodeBits) {
  const DType t = GetParam();
  const test::ExactMath exact;
  const test::BatchInvariantMath invariant;
  std::mt19937 rng(77 + static_cast<unsigned>(t));
  ThreadPool pool(2);
  const int64_t n_in = dtype_info(t).block_size == kQK_K ? 512 : 160, n_out = 53;
  const Weights w = make_weights(rng, t, n_out, n_in);
  for (int64_t n_tokens : {13, 45}) {
    const std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_tokens * n_in), -1.0f, 1.0f);
    for (Isa isa : test::runnable_isas()) {
      test::ForcedIsa forced(isa);
      std::vector<float> batch(static_cast<size_t>(n_tokens * n_out));
      kernels::matmul(batch.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool);
      for (int64_t tok = 0; tok < n_tokens; ++tok) {
        std::vector<float> one(static_cast<size_t>(n_out));
        kernels::matmul(one.data(), x.data() + tok * n_in, w.bytes.data(), t, 1, n_in, n_out, pool);
        ASSERT_EQ(0, std::memcmp(one.data(), batch.data() + tok * n_out, one.size() * sizeof(float)))
            << dtype_name(t) << " " << isa_name(isa) << " step of " << n_tokens << ", token " << tok;
      }
    }
  }
}

// With x one-hot, y[t][r] is a single weight times 1: it shows that every
// path dequantizes every position of a block exactly as dequantize_row does.
TEST_P(MatmulByType, OneHotInputsReadBackExactWeights) {
  const DType t = GetParam();
  const test::ExactMath exact;
  std::mt19937 rng(99 + static_cast<unsigned>(t));
  ThreadPool pool(1);
  const int64_t n_in = std::max<int64_t>(64, dtype_info(t).block_size), n_out = 9;
  const Weights w = make_weights(rng, t, n_out, n_in);
  for (int64_t n_tokens : {4, 64}) {  // the GEMV and the GEMM path
    // Token tok of call c reads position (7 tok + n_tokens c) mod n_in; the
    // calls together visit every position.
    for (int64_t c = 0; c < n_in / n_tokens; ++c) {
      auto pos = [&](int64_t tok) { return (tok * 7 + c * n_tokens) % n_in; };
      std::vector<float> x(static_cast<size_t>(n_tokens * n_in), 0.0f);
      for (int64_t tok = 0; tok < n_tokens; ++tok) x[tok * n_in + pos(tok)] = 1.0f;
      for (Isa isa : test::runnable_isas()) {
        test::ForcedIsa forced(isa);
        std::vector<float> y(static_cast<size_t>(n_tokens * n_out));
        kernels::matmul(y.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool);
        for (int64_t tok = 0; tok < n_tokens; ++tok) {
          for (int64_t r = 0; r < n_out; ++r) {
            ASSERT_EQ(y[tok * n_out + r], w.deq[r * n_in + pos(tok)])
                << dtype_name(t) << " " << isa_name(isa) << " token " << tok << " row " << r;
          }
        }
      }
    }
  }
}

// Rows go to threads in whole units, and each row is computed the same way by
// whichever thread owns it: 1, 2 and 3 threads give identical bits.
TEST_P(MatmulByType, SameResultForAnyThreadCount) {
  const DType t = GetParam();
  const test::ExactMath exact;
  std::mt19937 rng(7 + static_cast<unsigned>(t));
  const int64_t n_in = 256, n_out = 301;
  const Weights w = make_weights(rng, t, n_out, n_in);
  ThreadPool pool1(1), pool2(2), pool3(3);
  for (int64_t n_tokens : {1, 6, 20}) {
    const std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_tokens * n_in), -1.0f, 1.0f);
    for (Isa isa : test::runnable_isas()) {
      test::ForcedIsa forced(isa);
      std::vector<float> y1(static_cast<size_t>(n_tokens * n_out)), y2(y1.size()), y3(y1.size());
      kernels::matmul(y1.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool1);
      kernels::matmul(y2.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool2);
      kernels::matmul(y3.data(), x.data(), w.bytes.data(), t, n_tokens, n_in, n_out, pool3);
      EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)))
          << dtype_name(t) << " " << isa_name(isa) << " n_tokens " << n_tokens << ": 1 vs 2 threads";
      EXPECT_EQ(0, std::memcmp(y1.data(), y3.data(), y1.size() * sizeof(float)))
          << dtype_name(t) << " " << isa_name(isa) << " n_tokens " << n_tokens << ": 1 vs 3 threads";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulByType, testing::ValuesIn(kAllTypes),
                         [](const testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

TEST(Matmul, RejectsRowLengthNotAMultipleOfTheBlock) {
  ThreadPool pool(1);
  std::vector<uint8_t> w(1024);
  std::vector<float> x(48), y(2);
  try {
    kernels::matmul(y.data(), x.data(), w.data(), DType::q4_0, 1, 48, 2, pool);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("q4_0"), std::string::npos) << e.what();
  }
}

TEST(Matmul, EmptyShapesWriteNothingOrZeros) {
  ThreadPool pool(2);
  std::vector<float> y(6, 5.0f);
  kernels::matmul(y.data(), nullptr, nullptr, DType::f32, 0, 8, 3, pool);  // no tokens: y untouched
  EXPECT_EQ(y[0], 5.0f);
  kernels::matmul(y.data(), nullptr, nullptr, DType::f32, 2, 0, 3, pool);  // empty sums
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace troupe
