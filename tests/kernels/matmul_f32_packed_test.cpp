// matmul over f32 weights repacked as lines of 16 rows
// (kernels/cpu/f32_packed.hpp): against the product computed in double,
// within f32 accumulation error, for the decode kernel (below 16 tokens) and
// the prefill tiles (8, 4, 2 and 1 tokens), whole and partial groups; and a
// token's bits the same whatever the batch and threads within one kernel; on
// the AVX-512 kernels and the AVX2 ones (halves of 8 rows), which give the
// same bits. Where the CPU has AMX, the prefill at the reduced precisions
// (three bf16 products of split operands, or one): within their rounding,
// and the batch rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/thread_pool.hpp"
#include "batch_bits.hpp"
#include "isa_paths.hpp"
#include "kernels/cpu/f32_packed.hpp"
#include "tests/exact_math.hpp"

namespace troupe {
namespace {

struct F32Packed {
  std::unique_ptr<uint8_t, decltype(&std::free)> bytes{nullptr, &std::free};
};

F32Packed pack_f32(const std::vector<float>& w, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  F32Packed p;
  const auto bytes = static_cast<size_t>(kernels::f32_packed_bytes(n_in, n_out));
  p.bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
  kernels::pack_f32(p.bytes.get(), w.data(), n_in, n_out, pool);
  return p;
}

using test::ForcedIsa;

// Random activations x [n_tokens, n_in] in [-1, 1], every 7th 50 times
// larger, and y = x · W^T from the packed W.
struct Product {
  std::vector<float> x, y;
};

Product run(std::mt19937& rng, const F32Packed& p, int64_t n_tokens, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  Product r;
  r.x = test::random_floats(rng, static_cast<size_t>(n_tokens * n_in), -1.0f, 1.0f);
  for (int64_t i = 0; i < n_tokens * n_in; i += 7) r.x[static_cast<size_t>(i)] *= 50.0f;
  r.y.assign(static_cast<size_t>(n_tokens * n_out), std::nanf(""));
  kernels::matmul_f32_packed(r.y.data(), r.x.data(), p.bytes.get(), n_tokens, n_in, n_out, pool);
  return r;
}

// Each output of y [n_tokens, n_out] against x [n_tokens, n_in] · w^T
// [n_in, n_out] in double, within bound(the output's Σ|x w|).
template <class Bound>
void expect_product(const std::vector<float>& y, const std::vector<float>& x, const std::vector<float>& w,
                    int64_t n_tokens, int64_t n_in, int64_t n_out, Bound bound, const std::string& what) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_out; ++r) {
      double want = 0, abs_sum = 0;
      for (int64_t k = 0; k < n_in; ++k) {
        const double v = double(x[static_cast<size_t>(t * n_in + k)]) * w[static_cast<size_t>(r * n_in + k)];
        want += v;
        abs_sum += std::fabs(v);
      }
      ASSERT_NEAR(y[static_cast<size_t>(t * n_out + r)], want, bound(abs_sum))
          << what << " token " << t << " row " << r;
    }
  }
}

// The kernels of each ISA this CPU runs, forced in turn.
class MatmulF32Packed : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU has no " << isa_name(GetParam());
    isa_.emplace(GetParam());
    ASSERT_TRUE(kernels::f32_packing_available());
  }
  std::optional<ForcedIsa> isa_;
};

TEST_P(MatmulF32Packed, MatchesTheProductInDouble) {
  std::mt19937 rng(2468);
  ThreadPool pool(2);
  for (int64_t n_in : {1, 5, 16, 100, 1000}) {  // tails of the four decode chains
    for (int64_t n_out : {5, 50, 600}) {       // partial groups of 16, pairs of groups
      const std::vector<float> w = test::random_floats(rng, static_cast<size_t>(n_out * n_in), -1.0f, 1.0f);
      const F32Packed p = pack_f32(w, n_in, n_out, pool);
      for (int64_t n_tokens : {1, 2, 3, 6, 16, 17, 23, 40}) {  // 23: prefill tiles of 8, 4, 2 and 1
        const auto [x, y] = run(rng, p, n_tokens, n_in, n_out, pool);
        ASSERT_NO_FATAL_FAILURE(expect_product(
            y, x, w, n_tokens, n_in, n_out,
            [&](double abs_sum) { return double(n_in + 1) * std::ldexp(1.0, -24) * abs_sum; },
            "n_in " + std::to_string(n_in) + " n_out " + std::to_string(n_out) + " n_tokens " +
                std::to_string(n_tokens)));
      }
    }
  }
}

// safetensors data may sit at any address: rows read from an odd one pack
// to the same bytes.
TEST_P(MatmulF32Packed, PacksRowsAtAnyAddress) {
  std::mt19937 rng(13);
  const int64_t n_in = 37, n_out = 21;
  ThreadPool pool(2);
  const std::vector<float> w = test::random_floats(rng, static_cast<size_t>(n_out * n_in), -1.0f, 1.0f);
  std::vector<uint8_t> odd(w.size() * sizeof(float) + 1);
  std::memcpy(odd.data() + 1, w.data(), w.size() * sizeof(float));
  const F32Packed a = pack_f32(w, n_in, n_out, pool);
  F32Packed b;
  const auto bytes = static_cast<size_t>(kernels::f32_packed_bytes(n_in, n_out));
  b.bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
  kernels::pack_f32(b.bytes.get(), reinterpret_cast<const float*>(odd.data() + 1), n_in, n_out, pool);
  EXPECT_EQ(std::memcmp(a.bytes.get(), b.bytes.get(), bytes), 0);
}

// Decode (below 16 tokens, and every batch in batch-invariant mode) sums in
// four chains, the prefill tiles in one: each gives a token the same bits in
// any batch and on any number of threads, but not each other's.
TEST_P(MatmulF32Packed, ATokensOutputsDoNotDependOnTheBatchOrThreads) {
  std::mt19937 rng(97);
  const int64_t n_in = 300, n_out = 150, n_max = 40;
  ThreadPool pool2(2);
  const std::vector<float> w = test::random_floats(rng, static_cast<size_t>(n_out * n_in), -1.0f, 1.0f);
  const F32Packed p = pack_f32(w, n_in, n_out, pool2);
  const std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_max * n_in), -1.0f, 1.0f);
  for (F32Precision precision : {F32Precision::highest, F32Precision::high, F32Precision::medium}) {
    const test::F32MatmulPrecision prefill(precision);
    test::expect_token_bits_by_batch(
        [&](float* y, const float* xs, int64_t n_tokens, ThreadPool& pool) {
          kernels::matmul_f32_packed(y, xs, p.bytes.get(), n_tokens, n_in, n_out, pool);
        },
        x, n_in, n_out, n_max, "f32 " + std::string(f32_precision_name(precision)));
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, MatmulF32Packed, testing::Values(Isa::avx512, Isa::avx2),
                         [](const testing::TestParamInfo<Isa>& p) { return std::string(isa_name(p.param)); });

// The AVX2 kernels repeat the AVX-512 ones' chains and tiles lane for lane.
TEST(MatmulF32PackedIsas, Avx2GivesTheAvx512Bits) {
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "this CPU has no AVX-512 to compare with";
  std::mt19937 rng(4);
  ThreadPool pool(2);
  const int64_t n_in = 203, n_out = 45;
  const std::vector<float> w = test::random_floats(rng, static_cast<size_t>(n_out * n_in), -1.0f, 1.0f);
  const F32Packed p = pack_f32(w, n_in, n_out, pool);
  for (int64_t n_tokens : {1, 2, 7, 16, 23}) {
    const std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_tokens * n_in), -1.0f, 1.0f);
    std::vector<float> y[2];
    for (int i = 0; i < 2; ++i) {
      const ForcedIsa isa(i == 0 ? Isa::avx512 : Isa::avx2);
      y[i].assign(static_cast<size_t>(n_tokens * n_out), std::nanf(""));
      kernels::matmul_f32_packed(y[i].data(), x.data(), p.bytes.get(), n_tokens, n_in, n_out, pool);
    }
    ASSERT_EQ(0, std::memcmp(y[0].data(), y[1].data(), y[0].size() * sizeof(float))) << "n_tokens " << n_tokens;
  }
}

// The reduced precisions on AMX, against the product in double. high: x =
// x_hi + x_lo + e with |e| <= 2^-16 |x| (two roundings to bf16's 8
// significant bits), the same for w, and x_lo w_lo dropped, so a product is
// off by at most 3 · 2^-16 |x w|; the 3 n_in products accumulate in f32.
// Without the low parts the error would be about 2^-8 of a product, which
// that bound does not admit. medium: x and w each rounded once to bf16.
// The default, highest, keeps the FMA kernels (MatchesTheProductInDouble).
void expect_within_rounding(F32Precision precision, double product_error, int parts) {
  if (!isa_supported(Isa::avx512) || !cpu_has_amx() || !cpu_has_avx512_bf16()) {
    GTEST_SKIP() << "this CPU has no AMX-BF16: f32 prefill runs the FMA kernels at every precision";
  }
  const ForcedIsa isa(Isa::avx512);
  const test::F32MatmulPrecision reduced(precision);
  std::mt19937 rng(8642 + parts);
  ThreadPool pool(2);
  for (int64_t n_in : {1, 5, 32, 100, 1000}) {  // part of a tile row, whole rows, several
    for (int64_t n_out : {5, 50, 600}) {        // partial groups, pairs, chunks of 16 groups
      if (n_out == 600 && n_in != 1000) continue;
      const std::vector<float> w = test::random_floats(rng, static_cast<size_t>(n_out * n_in), -1.0f, 1.0f);
      const F32Packed p = pack_f32(w, n_in, n_out, pool);
      for (int64_t n_tokens : {16, 17, 40}) {  // one token tile, a partial second, two blocks of 32
        const auto [x, y] = run(rng, p, n_tokens, n_in, n_out, pool);
        ASSERT_NO_FATAL_FAILURE(expect_product(
            y, x, w, n_tokens, n_in, n_out,
            [&](double abs_sum) {
              const double accumulate = double(parts * n_in + 1) * std::ldexp(1.0, -24) * (1 + std::ldexp(1.0, -7));
              return (product_error + accumulate) * abs_sum;
            },
            std::string(f32_precision_name(precision)) + " n_in " + std::to_string(n_in) + " n_out " +
                std::to_string(n_out) + " n_tokens " + std::to_string(n_tokens)));
      }
    }
  }
}

TEST(MatmulF32PackedAmx, HighIsWithinTheSplitError) {
  expect_within_rounding(F32Precision::high, 3 * std::ldexp(1.0, -16), 3);
}

TEST(MatmulF32PackedAmx, MediumIsWithinBf16Rounding) {
  const double u = std::ldexp(1.0, -8);  // bf16's unit roundoff
  expect_within_rounding(F32Precision::medium, 2 * u + u * u, 1);
}

}  // namespace
}  // namespace troupe
