// matmul over weights repacked for the int8 path (kernels/cpu/int8_packed.hpp)
// for every quantized weight type: the same two references as the unpacked
// int8 path (int8_reference.hpp) on VNNI and for decode, a bf16 bound for
// the AMX prefill (which expands the groups to bf16), and that a token's
// outputs are the same bits whatever the batch around it and the thread
// count within each of those kernels.
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
#include "int8_reference.hpp"
#include "kernels/cpu/int8_packed.hpp"
#include "kernels/cpu/packed_groups.hpp"

namespace troupe {
namespace {

using test::AmxSwitch;
using test::kRelTol;

struct Int8Packed {
  std::unique_ptr<uint8_t, decltype(&std::free)> bytes{nullptr, &std::free};
};

Int8Packed pack_int8(const test::Weights& w, DType t, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  const int64_t n = kernels::int8_packed_bytes(t, n_in, n_out);
  Int8Packed p;
  p.bytes.reset(static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>(n))));
  kernels::pack_int8(p.bytes.get(), w.bytes.data(), t, n_in, n_out, pool);
  return p;
}

class MatmulPacked : public testing::TestWithParam<DType> {};

TEST_P(MatmulPacked, MatchesQuantizedActivationsAndStaysWithinTheirError) {
  if (!test::int8_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: no int8 repacking";
  const DType t = GetParam();
  std::mt19937 rng(2468 + static_cast<unsigned>(t));
  ThreadPool pool(2);
  const bool kquant = dtype_info(t).block_size == kQK_K;
  const std::vector<int64_t> n_ins = kquant ? std::vector<int64_t>{256, 768, 4096} : std::vector<int64_t>{32, 96, 4096};
  for (int64_t n_in : n_ins) {
    for (int64_t n_out : {5, 101, 300}) {  // partial groups of 16 and row units of 48
      if (n_out == 300 && n_in != 4096) continue;  // AMX chunks of 8 groups at 4096 inputs: several per thread
      const test::Weights w = test::make_weights(rng, t, n_out, n_in);
      const Int8Packed p = pack_int8(w, t, n_in, n_out, pool);
      for (int64_t n_tokens : {1, 3, 6, 17, 40}) {
        const std::vector<float> x = test::int8_inputs(rng, n_tokens, n_in);
        const test::Expected e = test::expected(x, w, n_tokens, n_in, n_out);
        for (bool amx : test::amx_settings()) {
          const AmxSwitch use_amx(amx);
          std::vector<float> y(static_cast<size_t>(n_tokens * n_out), std::nanf(""));
          kernels::matmul_int8_packed(y.data(), x.data(), p.bytes.get(), t, n_tokens, n_in, n_out, pool);
          const std::string what = std::string(dtype_name(t)) + (amx ? " amx" : " vnni") + " n_tokens " +
                                   std::to_string(n_tokens) + " n_in " + std::to_string(n_in) + " n_out " +
                                   std::to_string(n_out);
          if (test::packed_prefill_is_bf16(amx, n_tokens)) {
            test::expect_bf16_result(y, e, n_out, what);
          } else {
            test::expect_int8_result(y, e, n_out, what);
          }
        }
      }
    }
  }
}

// Below 16 tokens (decode) and on VNNI the arithmetic per token is the same
// for any batch; the AMX prefill (bf16) is the same bits for any batch of 16
// or more and any thread count, but not the decode's bits; batch-invariant
// math keeps the int8 arithmetic (AMX int8 tiles) for every batch.
TEST_P(MatmulPacked, ATokensOutputsDoNotDependOnTheBatchOrThreads) {
  if (!test::int8_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: no int8 repacking";
  const DType t = GetParam();
  std::mt19937 rng(97 + static_cast<unsigned>(t));
  const int64_t n_in = 512, n_out = 150;
  ThreadPool pool1(1), pool2(2), pool3(3);
  const test::Weights w = test::make_weights(rng, t, n_out, n_in);
  const Int8Packed p = pack_int8(w, t, n_in, n_out, pool2);
  const int64_t n_max = 40;
  const std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_max * n_in), -1.0f, 1.0f);
  auto token0 = [&](int64_t n_tokens, ThreadPool& pool) {
    std::vector<float> y(static_cast<size_t>(n_tokens * n_out));
    kernels::matmul_int8_packed(y.data(), x.data(), p.bytes.get(), t, n_tokens, n_in, n_out, pool);
    y.resize(static_cast<size_t>(n_out));
    return y;
  };
  // Token 0 alone (decode) is the reference for every batch that starts with it.
  const std::vector<float> alone = token0(1, pool1);
  for (bool invariant : {false, true}) {
    const test::BatchInvariantMath mode(invariant);
    for (bool amx : test::amx_settings()) {
      const AmxSwitch use_amx(amx);
      const std::vector<float> big = token0(n_max, pool1);
      for (int64_t n_tokens : {2, 5, 15, 16, 17, 40}) {
        for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
          const bool bf16 = !invariant && test::packed_prefill_is_bf16(amx, n_tokens);
          EXPECT_EQ(token0(n_tokens, *pool), bf16 ? big : alone)
              << dtype_name(t) << " n_tokens " << n_tokens << " threads " << pool->size() << (amx ? " amx" : "")
              << (invariant ? " batch-invariant" : "");
        }
      }
    }
  }
}

// q, k and v (or gate and up) as one matmul: x quantized once and all their
// groups in one split over the threads; each matrix gets the bits of its own
// matmul, for decode, the VNNI/AMX prefill, any thread count, and more
// matrices than one call takes (five: split in calls of four).
TEST_P(MatmulPacked, SeveralMatricesAsOneGetEachItsOwnBits) {
  if (!test::int8_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: no int8 repacking";
  const DType t = GetParam();
  std::mt19937 rng(531 + static_cast<unsigned>(t));
  const int64_t n_in = 512;
  const std::vector<int64_t> n_outs = {101, 5, 48, 150, 17};
  ThreadPool pool1(1), pool2(2), pool3(3);
  std::vector<test::Weights> ws;
  std::vector<Int8Packed> ps;
  for (int64_t n_out : n_outs) {
    ws.push_back(test::make_weights(rng, t, n_out, n_in));
    ps.push_back(pack_int8(ws.back(), t, n_in, n_out, pool2));
  }
  for (int64_t n_tokens : {1, 3, 17, 40}) {
    const std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_tokens * n_in), -1.0f, 1.0f);
    for (bool amx : test::amx_settings()) {
      const AmxSwitch use_amx(amx);
      for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
        for (size_t n_mats : {size_t{1}, size_t{3}, n_outs.size()}) {
          std::vector<std::vector<float>> one(n_mats), fused(n_mats);
          std::vector<kernels::PackedOutput> outs;
          for (size_t i = 0; i < n_mats; ++i) {
            const auto n = static_cast<size_t>(n_tokens * n_outs[i]);
            one[i].assign(n, std::nanf(""));
            fused[i].assign(n, std::nanf(""));
            kernels::matmul_int8_packed(one[i].data(), x.data(), ps[i].bytes.get(), t, n_tokens, n_in, n_outs[i],
                                        *pool);
            outs.push_back({.y = fused[i].data(), .packed = ps[i].bytes.get(), .n_out = n_outs[i]});
          }
          kernels::matmul_int8_packed_n(outs, x.data(), t, n_tokens, n_in, *pool);
          for (size_t i = 0; i < n_mats; ++i) {
            ASSERT_EQ(0, std::memcmp(one[i].data(), fused[i].data(), one[i].size() * sizeof(float)))
                << dtype_name(t) << " matrix " << i << " of " << n_mats << " n_tokens " << n_tokens << " threads "
                << pool->size() << (amx ? " amx" : "");
          }
        }
      }
    }
  }
}

// The packed layout keeps the GGUF sizes, within a k-quant header's padding
// to whole cache lines (the header comment's table).
TEST(MatmulPacked, SizesAgainstGguf) {
  if (!test::int8_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: no int8 repacking";
  const int64_t n_in = 4096, n_out = 4096;
  auto ratio = [&](DType t) {
    return double(kernels::int8_packed_bytes(t, n_in, n_out)) / double(row_bytes(t, n_in) * n_out);
  };
  EXPECT_DOUBLE_EQ(ratio(DType::q4_0), 1.0);
  EXPECT_DOUBLE_EQ(ratio(DType::q4_1), 1.0);
  EXPECT_DOUBLE_EQ(ratio(DType::q5_0), 1.0);
  EXPECT_DOUBLE_EQ(ratio(DType::q5_1), 1.0);
  EXPECT_DOUBLE_EQ(ratio(DType::q8_0), 1.0);
  EXPECT_LT(ratio(DType::q4_K), 1.03);
  EXPECT_LT(ratio(DType::q5_K), 1.03);
  EXPECT_LT(ratio(DType::q6_K), 1.01);
  EXPECT_DOUBLE_EQ(ratio(DType::q2_K), 1.0);
  EXPECT_LT(ratio(DType::q3_K), 1.06);
  EXPECT_DOUBLE_EQ(ratio(DType::iq4_nl), 1.0);
  EXPECT_LT(ratio(DType::iq4_xs), 1.03);
  // iq4_nl's layout with the scale as bf16 (2 bytes) for the E8M0 byte:
  // 288 bytes a unit of 16 rows for the GGUF's 272.
  EXPECT_DOUBLE_EQ(ratio(DType::mxfp4), 288.0 / 272.0);
}

INSTANTIATE_TEST_SUITE_P(QuantTypes, MatmulPacked, testing::ValuesIn(test::kInt8Types),
                         [](const testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

// The GEMVs' prefetch distance: 4 KiB on AMD family 19h whatever the size;
// on Intel, 2 KiB once the int8 weights in use outgrow L3 and a group on
// again when they no longer do; elsewhere always a group on (0).
TEST(PackedGemvPrefetch, FollowsWhetherTheInt8WeightsFitInL3) {
  const int64_t l3 = cpu_l3_bytes();
  const uintptr_t before = kernels::detail::packed_gemv_prefetch_ahead();
  const int64_t more = l3 + 1;
  kernels::count_int8_packed_bytes(more);
  const uintptr_t outgrown = kernels::detail::packed_gemv_prefetch_ahead();
  kernels::count_int8_packed_bytes(-more);
  EXPECT_EQ(kernels::detail::packed_gemv_prefetch_ahead(), before);
  if (cpu_is_amd_family_19h()) {
    EXPECT_EQ(before, 4096u);
    EXPECT_EQ(outgrown, 4096u);
  } else if (cpu_is_intel() && l3 > 0) {
    EXPECT_EQ(before, 0u) << "no weights are held yet in this test";
    EXPECT_EQ(outgrown, 2048u);
  } else {
    EXPECT_EQ(before, 0u);
    EXPECT_EQ(outgrown, 0u);
  }
}

}  // namespace
}  // namespace troupe
