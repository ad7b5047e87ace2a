// matmul over f16 and bf16 weights repacked for AVX2 (kernels/cpu/
// half_packed.hpp), forced on whatever x86 CPU runs the test: against the
// product of the stored values and f32 activations computed in double,
// within f32 accumulation error (the layout keeps the values exactly), for
// the decode kernel and the prefill tiles, whole and partial groups; a
// token's bits whatever the batch and threads within one kernel; rows packed
// from any address.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/dtype.hpp"
#include "core/thread_pool.hpp"
#include "batch_bits.hpp"
#include "isa_paths.hpp"
#include "kernels/cpu/half_packed.hpp"
#include "tests/exact_math.hpp"

namespace troupe {
namespace {

using test::ForcedIsa;
using Bytes = std::unique_ptr<uint8_t, decltype(&std::free)>;

// n_out × n_in weights of type t (f16 or bf16): the stored bytes and their
// values.
struct HalfWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

HalfWeights make_half_weights(std::mt19937& rng, DType t, int64_t n_out, int64_t n_in) {
  const std::vector<float> src = test::random_floats(rng, static_cast<size_t>(n_out * n_in), -1.0f, 1.0f);
  HalfWeights w;
  w.bytes.resize(src.size() * 2);
  w.values.resize(src.size());
  quantize_row(t, src.data(), w.bytes.data(), static_cast<int64_t>(src.size()));
  dequantize_row(t, w.bytes.data(), w.values.data(), static_cast<int64_t>(src.size()));
  return w;
}

Bytes pack_half(const void* w, DType t, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  const auto n = static_cast<size_t>(kernels::half_packed_bytes(n_in, n_out));
  Bytes p(static_cast<uint8_t*>(std::aligned_alloc(64, n)), &std::free);
  kernels::pack_half(p.get(), w, t, n_in, n_out, pool);
  return p;
}

class MatmulHalfPacked : public testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "this CPU has no AVX2";
  }
};

TEST_P(MatmulHalfPacked, MatchesTheProductInDouble) {
  const DType t = GetParam();
  const ForcedIsa avx2(Isa::avx2);
  ASSERT_TRUE(kernels::half_packing_available(t));
  std::mt19937 rng(8642 + static_cast<unsigned>(t));
  ThreadPool pool(2);
  for (int64_t n_in : {1, 5, 16, 100, 1000}) {  // tails of the four decode chains; an odd number of runs
    for (int64_t n_out : {5, 12, 50}) {        // partial groups of 16 and halves of 8
      const HalfWeights w = make_half_weights(rng, t, n_out, n_in);
      const Bytes p = pack_half(w.bytes.data(), t, n_in, n_out, pool);
      for (int64_t n_tokens : {1, 2, 3, 15, 16, 19}) {  // 19: prefill tiles of 4 and a tail of 3
        std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_tokens * n_in), -1.0f, 1.0f);
        for (int64_t i = 0; i < n_tokens * n_in; i += 7) x[static_cast<size_t>(i)] *= 50.0f;
        std::vector<float> y(static_cast<size_t>(n_tokens * n_out), std::nanf(""));
        kernels::matmul_half_packed(y.data(), x.data(), p.get(), t, n_tokens, n_in, n_out, pool);
        for (int64_t tok = 0; tok < n_tokens; ++tok) {
          for (int64_t r = 0; r < n_out; ++r) {
            double want = 0, abs_sum = 0;
            for (int64_t k = 0; k < n_in; ++k) {
              const double v =
                  double(x[static_cast<size_t>(tok * n_in + k)]) * w.values[static_cast<size_t>(r * n_in + k)];
              want += v;
              abs_sum += std::fabs(v);
            }
            const double bound = double(n_in + 1) * std::ldexp(1.0, -24) * abs_sum;
            ASSERT_NEAR(y[static_cast<size_t>(tok * n_out + r)], want, bound)
                << dtype_name(t) << " n_in " << n_in << " n_out " << n_out << " n_tokens " << n_tokens << " token "
                << tok << " row " << r;
          }
        }
      }
    }
  }
}

TEST_P(MatmulHalfPacked, PacksRowsAtAnyAddress) {
  const DType t = GetParam();
  const ForcedIsa avx2(Isa::avx2);
  std::mt19937 rng(31);
  const int64_t n_in = 37, n_out = 21;
  ThreadPool pool(2);
  const HalfWeights w = make_half_weights(rng, t, n_out, n_in);
  std::vector<uint8_t> odd(w.bytes.size() + 1);
  std::memcpy(odd.data() + 1, w.bytes.data(), w.bytes.size());
  const Bytes a = pack_half(w.bytes.data(), t, n_in, n_out, pool);
  const Bytes b = pack_half(odd.data() + 1, t, n_in, n_out, pool);
  EXPECT_EQ(std::memcmp(a.get(), b.get(), static_cast<size_t>(kernels::half_packed_bytes(n_in, n_out))), 0);
}

// Decode (below 16 tokens, and every batch under batch-invariant math) sums
// in four chains, the prefill tiles in one: each gives a token the same bits
// in any batch and on any number of threads.
TEST_P(MatmulHalfPacked, ATokensOutputsDoNotDependOnTheBatchOrThreads) {
  const DType t = GetParam();
  const ForcedIsa avx2(Isa::avx2);
  std::mt19937 rng(79);
  const int64_t n_in = 300, n_out = 150, n_max = 40;
  ThreadPool pool2(2);
  const HalfWeights w = make_half_weights(rng, t, n_out, n_in);
  const Bytes p = pack_half(w.bytes.data(), t, n_in, n_out, pool2);
  const std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_max * n_in), -1.0f, 1.0f);
  test::expect_token_bits_by_batch(
      [&](float* y, const float* xs, int64_t n_tokens, ThreadPool& pool) {
        kernels::matmul_half_packed(y, xs, p.get(), t, n_tokens, n_in, n_out, pool);
      },
      x, n_in, n_out, n_max, std::string(dtype_name(t)));
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulHalfPacked, testing::Values(DType::f16, DType::bf16),
                         [](const testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

// The layout is for CPUs without AVX-512 BF16 (bf16_packed.hpp where it
// exists): AVX2, and AVX-512 without BF16; not the scalar path, nor other
// types.
TEST(MatmulHalfPackedAvailability, AvxTwoOnlyAndSixteenBitOnly) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "this CPU has no AVX2";
  {
    const ForcedIsa avx2(Isa::avx2);
    EXPECT_FALSE(kernels::half_packing_available(DType::f32));
    EXPECT_FALSE(kernels::half_packing_available(DType::q8_0));
  }
  {
    const ForcedIsa scalar(Isa::scalar);
    EXPECT_FALSE(kernels::half_packing_available(DType::f16));
  }
  if (isa_supported(Isa::avx512)) {
    const ForcedIsa avx512(Isa::avx512);
    EXPECT_EQ(kernels::half_packing_available(DType::bf16), !cpu_has_avx512_bf16());
  }
}

}  // namespace
}  // namespace troupe
