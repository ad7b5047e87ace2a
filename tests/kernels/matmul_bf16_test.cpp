// matmul over f16/bf16 weights repacked for the bf16 path
// (kernels/cpu/bf16_packed.hpp): against the product of the bf16-rounded
// operands computed in double (to f32 accumulation error), against the exact
// product (within the bf16 rounding of the activations and, for f16, of the
// weights), and that a token's outputs are the same bits whatever the batch
// and thread count within one kernel (vdpbf16ps's decode kernel below 16
// tokens; from 16 on, AMX where present, else vdpbf16ps's prefill tiles).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "int8_reference.hpp"
#include "kernels/cpu/bf16_packed.hpp"

namespace troupe {
namespace {

using test::AmxSwitch;

bool bf16_path_runs() { return isa_supported(Isa::avx512) && cpu_has_avx512_bf16(); }

struct Bf16Packed {
  std::unique_ptr<uint8_t, decltype(&std::free)> bytes{nullptr, &std::free};
};

Bf16Packed pack_bf16(const test::Weights& w, DType t, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  Bf16Packed p;
  p.bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>(kernels::bf16_packed_bytes(n_in, n_out)))));
  kernels::pack_bf16(p.bytes.get(), w.bytes.data(), t, n_in, n_out, pool);
  return p;
}

float round_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }

class MatmulBf16 : public testing::TestWithParam<DType> {};

TEST_P(MatmulBf16, MatchesTheRoundedProductAndStaysWithinTheRounding) {
  if (!bf16_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 BF16: no bf16 path";
  const DType t = GetParam();
  std::mt19937 rng(1357 + static_cast<unsigned>(t));
  ThreadPool pool(2);
  // bf16's unit roundoff (8 significant bits); f16 weights are rounded once more.
  const double u_x = std::ldexp(1.0, -8);
  const double u_w = t == DType::f16 ? u_x : 0.0;
  for (int64_t n_in : {8, 40, 96, 1000}) {  // whole and partial tile rows of 32 inputs
    for (int64_t n_out : {5, 50, 600}) {     // partial groups of 16, pairs of groups
      if (n_out == 600 && n_in != 1000) continue;  // and AMX chunks of 16 groups: several per thread
      const test::Weights w = test::make_weights(rng, t, n_out, n_in);
      const Bf16Packed p = pack_bf16(w, t, n_in, n_out, pool);
      for (int64_t n_tokens : {1, 2, 3, 6, 16, 17, 23, 40}) {  // 23: prefill tiles of 8, 4, 2 and 1
        std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_tokens * n_in), -1.0f, 1.0f);
        for (int64_t i = 0; i < n_tokens * n_in; i += 7) x[static_cast<size_t>(i)] *= 50.0f;
        for (bool amx : test::amx_settings()) {
          const AmxSwitch use_amx(amx);
          std::vector<float> y(static_cast<size_t>(n_tokens * n_out), std::nanf(""));
          kernels::matmul_bf16_packed(y.data(), x.data(), p.bytes.get(), n_tokens, n_in, n_out, pool);
          for (int64_t tk = 0; tk < n_tokens; ++tk) {
            for (int64_t r = 0; r < n_out; ++r) {
              double rounded = 0, exact = 0, abs_sum = 0;
              for (int64_t k = 0; k < n_in; ++k) {
                const float xv = x[static_cast<size_t>(tk * n_in + k)];
                const float wv = w.deq[static_cast<size_t>(r * n_in + k)];
                rounded += double(round_bf16(xv)) * double(round_bf16(wv));
                exact += double(xv) * double(wv);
                abs_sum += std::fabs(double(xv) * double(wv));
              }
              const double got = y[static_cast<size_t>(tk * n_out + r)];
              const double accumulate = double(n_in + 1) * std::ldexp(1.0, -24) * abs_sum * (1 + 2 * u_x);
              const double round = (u_x + u_w + u_x * u_w) * abs_sum;
              ASSERT_NEAR(got, rounded, accumulate)
                  << dtype_name(t) << (amx ? " amx" : " avx512") << " n_in " << n_in << " n_out " << n_out
                  << " n_tokens " << n_tokens << " token " << tk << " row " << r;
              ASSERT_NEAR(got, exact, accumulate + round) << "token " << tk << " row " << r;
            }
          }
        }
      }
    }
  }
}

// vdpbf16ps accumulates each pair as two f32 additions (odd input first);
// AMX's tdpbf16ps rounds differently inside a tile (measured on Sapphire and
// Emerald Rapids), and the prefill tiles without AMX keep one chain an output
// where the decode kernel sums four, so from 16 tokens on (outside
// batch-invariant mode) results are the same bits whatever the batch and
// threads but not the decode's bits: the first test bounds both.
TEST_P(MatmulBf16, ATokensOutputsDoNotDependOnTheBatchOrThreads) {
  if (!bf16_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 BF16: no bf16 path";
  const DType t = GetParam();
  std::mt19937 rng(75 + static_cast<unsigned>(t));
  const int64_t n_in = 520, n_out = 150;
  ThreadPool pool1(1), pool2(2), pool3(3);
  const test::Weights w = test::make_weights(rng, t, n_out, n_in);
  const Bf16Packed p = pack_bf16(w, t, n_in, n_out, pool2);
  const int64_t n_max = 40;
  const std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_max * n_in), -1.0f, 1.0f);
  auto run = [&](int64_t n_tokens, ThreadPool& pool) {
    std::vector<float> y(static_cast<size_t>(n_tokens * n_out));
    kernels::matmul_bf16_packed(y.data(), x.data(), p.bytes.get(), n_tokens, n_in, n_out, pool);
    return y;
  };
  // Each token alone (decode) is the reference for the vdpbf16ps kernel.
  std::vector<float> alone(static_cast<size_t>(n_max * n_out));
  for (int64_t tk = 0; tk < n_max; ++tk) {
    kernels::matmul_bf16_packed(alone.data() + tk * n_out, x.data() + tk * n_in, p.bytes.get(), 1, n_in, n_out,
                                pool1);
  }
  for (bool invariant : {false, true}) {
    const test::BatchInvariantMath mode(invariant);  // on: vdpbf16ps for every batch
    for (bool amx : test::amx_settings()) {
      const AmxSwitch use_amx(amx);
      const std::vector<float> big = run(n_max, pool1);  // the prefill kernels' reference
      for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
        for (int64_t n_tokens : {2, 3, 4, 5, 15, 16, 33, 40}) {
          const std::vector<float> y = run(n_tokens, *pool);
          const std::vector<float>& want = !invariant && n_tokens >= 16 ? big : alone;
          for (size_t i = 0; i < y.size(); ++i) {
            ASSERT_EQ(y[i], want[i]) << (amx ? "amx" : "avx512") << (invariant ? " batch-invariant" : "")
                                     << " threads " << pool->size() << " n_tokens " << n_tokens << " token "
                                     << i / n_out << " row " << i % n_out;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulBf16, testing::Values(DType::f16, DType::bf16),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

TEST(MatmulBf16, SizeIsTheOriginalsWithRowsAndInputsPadded) {
  if (!bf16_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 BF16: no bf16 path";
  EXPECT_EQ(kernels::bf16_packed_bytes(576, 576), 576 * 576 * 2);
  EXPECT_EQ(kernels::bf16_packed_bytes(40, 17), 32 * 64 * 2);  // 17 rows → 32, 40 inputs → 64
  EXPECT_EQ(kernels::bf16_packed_bytes(4096, 1) % 64, 0);
}

TEST(MatmulBf16, RefusesWhatItCannotPack) {
  if (!bf16_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 BF16: no bf16 path";
  ThreadPool pool(1);
  std::vector<uint8_t> dst(4096);
  std::vector<uint8_t> w(4096);
  EXPECT_FALSE(kernels::bf16_packing_available(DType::q8_0));
  EXPECT_FALSE(kernels::bf16_packing_available(DType::f32));
  EXPECT_THROW(kernels::pack_bf16(dst.data(), w.data(), DType::q8_0, 32, 1, pool), Error);
  EXPECT_THROW(kernels::pack_bf16(dst.data(), w.data(), DType::f16, 0, 1, pool), Error);
}

}  // namespace
}  // namespace troupe
