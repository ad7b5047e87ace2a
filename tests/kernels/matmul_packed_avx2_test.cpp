// matmul over weights repacked for the int8 path (kernels/cpu/int8_packed.hpp)
// on the 256-bit kernels (matmul_packed_256.hpp), forced on whatever x86 CPU
// runs the test, with each kind of integer dot product it has (vpmaddubsw
// pairs; vpdpbusd in AVX-VNNI's VEX or AVX-512 VNNI's EVEX form): every
// quantized type against the two references of the int8 path
// (int8_reference.hpp); bit for bit against the zmm VNNI kernels over the
// same packed bytes where the CPU has VNNI; a token's bits whatever the
// batch, the thread count or the matrices fused with it; and which steps it
// takes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/dtype.hpp"
#include "core/thread_pool.hpp"
#include "int8_reference.hpp"
#include "isa_paths.hpp"
#include "kernels/cpu/int8_packed.hpp"

namespace troupe {
namespace {

using test::ForcedDots256;
using test::ForcedIsa;

using Bytes = std::unique_ptr<uint8_t, decltype(&std::free)>;

Bytes pack(const test::Weights& w, DType t, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  const int64_t n = kernels::int8_packed_bytes(t, n_in, n_out);
  Bytes p(static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>(n))), &std::free);
  kernels::pack_int8(p.get(), w.bytes.data(), t, n_in, n_out, pool);
  return p;
}

std::vector<float> run(const Bytes& p, const std::vector<float>& x, DType t, int64_t n_tokens, int64_t n_in,
                       int64_t n_out, ThreadPool& pool) {
  std::vector<float> y(static_cast<size_t>(n_tokens * n_out), std::nanf(""));
  kernels::matmul_int8_packed(y.data(), x.data(), p.get(), t, n_tokens, n_in, n_out, pool);
  return y;
}

// Each quantized type with each kind of dot product; a kind this CPU lacks
// is skipped, and says so.
class MatmulPackedAvx2 : public testing::TestWithParam<std::tuple<Dots256, DType>> {
 protected:
  void SetUp() override {
    if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "this CPU has no AVX2";
    if (!dots256_supported(dots())) GTEST_SKIP() << "this CPU has no " << dots256_name(dots()) << " dot products";
  }
  static Dots256 dots() { return std::get<0>(GetParam()); }
  static DType type() { return std::get<1>(GetParam()); }
};

TEST_P(MatmulPackedAvx2, MatchesQuantizedActivationsAndStaysWithinTheirError) {
  const DType t = type();
  std::mt19937 rng(4321 + static_cast<unsigned>(t));
  ThreadPool pool(2);
  const ForcedIsa avx2(Isa::avx2);
  const ForcedDots256 dots_in_use(dots());
  ASSERT_TRUE(kernels::int8_packing_available(t));
  for (int64_t n_in : test::int8_row_lengths(t)) {
    for (int64_t n_out : {5, 101}) {  // partial groups of 16, and halves of 8 with no rows
      const test::Weights w = test::make_weights(rng, t, n_out, n_in);
      const Bytes p = pack(w, t, n_in, n_out, pool);
      // The GEMV's tiles of 1-4 tokens and a four with a tail of three; the
      // prefill's tiles of 3-6 tokens (PairDots::kTileTokens) with each tail:
      // 8-13 leave every remainder of 3, 4, 5 and 6.
      for (int64_t n_tokens : {1, 2, 3, 4, 7, 8, 9, 10, 11, 12, 13}) {
        const std::vector<float> x = test::int8_inputs(rng, n_tokens, n_in);
        test::expect_int8_result(run(p, x, t, n_tokens, n_in, n_out, pool),
                                 test::expected(x, w, n_tokens, n_in, n_out),
                                 n_out, std::string(dtype_name(t)) + " packed ymm " +
                                            std::string(dots256_name(dots())) + " n_tokens " +
                                            std::to_string(n_tokens) + " n_in " + std::to_string(n_in) +
                                            " n_out " + std::to_string(n_out));
      }
    }
  }
}

// The int16 sums and the sign trick give vpdpbusd's integers, as vpdpbusd
// on ymm does, and the f32 scaling is the zmm VNNI kernels' lane for lane, in
// decode and prefill (AMX off: its prefill expands to bf16).
TEST_P(MatmulPackedAvx2, SameBitsAsTheVnniGemv) {
  if (!test::int8_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI to compare with";
  const DType t = type();
  std::mt19937 rng(77 + static_cast<unsigned>(t));
  ThreadPool pool(2);
  for (int64_t n_in : test::int8_row_lengths(t)) {
    const int64_t n_out = 53;
    const test::Weights w = test::make_weights(rng, t, n_out, n_in);
    const Bytes p = pack(w, t, n_in, n_out, pool);
    for (int64_t n_tokens : {1, 2, 3, 5, 9, 20}) {  // the VNNI GEMM runs 16 tokens and more
      const std::vector<float> x = test::int8_inputs(rng, n_tokens, n_in);
      std::vector<float> vnni, avx2;
      {
        const ForcedIsa isa(Isa::avx512);
        const test::AmxSwitch no_amx(false);
        vnni = run(p, x, t, n_tokens, n_in, n_out, pool);
      }
      {
        const ForcedIsa isa(Isa::avx2);
        const ForcedDots256 dots_in_use(dots());
        avx2 = run(p, x, t, n_tokens, n_in, n_out, pool);
      }
      for (size_t i = 0; i < vnni.size(); ++i) {
        uint32_t a, b;
        std::memcpy(&a, &vnni[i], sizeof a);
        std::memcpy(&b, &avx2[i], sizeof b);
        ASSERT_EQ(a, b) << dtype_name(t) << " " << dots256_name(dots()) << " n_in " << n_in << " n_tokens " << n_tokens
                        << " output " << i << ": vnni " << vnni[i] << ", 256-bit " << avx2[i];
      }
    }
  }
}

// Token 0's outputs are the same bits alone and in batches up to 40 (the
// prefill's panel tiles), over 1-3 threads, and fused with other matrices.
TEST_P(MatmulPackedAvx2, ATokensBitsDoNotDependOnBatchThreadsOrFusion) {
  const DType t = type();
  std::mt19937 rng(91 + static_cast<unsigned>(t));
  const ForcedIsa avx2(Isa::avx2);
  const ForcedDots256 dots_in_use(dots());
  const int64_t n_in = 512;
  const std::vector<int64_t> n_outs = {150, 5, 48, 17, 101};  // five: two calls of at most four
  ThreadPool pool1(1), pool2(2), pool3(3);
  std::vector<test::Weights> ws;
  std::vector<Bytes> ps;
  for (int64_t n_out : n_outs) {
    ws.push_back(test::make_weights(rng, t, n_out, n_in));
    ps.push_back(pack(ws.back(), t, n_in, n_out, pool2));
  }
  const int64_t n_max = 40;
  const std::vector<float> x = test::int8_inputs(rng, n_max, n_in);
  std::vector<float> alone = run(ps[0], x, t, 1, n_in, n_outs[0], pool1);
  for (int64_t n_tokens : {2, 5, 8, 17, 40}) {
    for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
      std::vector<std::vector<float>> ys;
      std::vector<kernels::PackedOutput> outs;
      for (size_t i = 0; i < n_outs.size(); ++i) {
        ys.emplace_back(static_cast<size_t>(n_tokens * n_outs[i]), std::nanf(""));
        outs.push_back({.y = ys.back().data(), .packed = ps[i].get(), .n_out = n_outs[i]});
      }
      kernels::matmul_int8_packed_n(outs, x.data(), t, n_tokens, n_in, *pool);
      for (size_t i = 0; i < n_outs.size(); ++i) {
        const std::vector<float> one = run(ps[i], x, t, n_tokens, n_in, n_outs[i], *pool);
        ASSERT_EQ(0, std::memcmp(one.data(), ys[i].data(), one.size() * sizeof(float)))
            << dtype_name(t) << " matrix " << i << " n_tokens " << n_tokens << " threads " << pool->size();
      }
      ys[0].resize(static_cast<size_t>(n_outs[0]));
      EXPECT_EQ(ys[0], alone) << dtype_name(t) << " n_tokens " << n_tokens << " threads " << pool->size();
    }
  }
}

std::string param_name(const testing::TestParamInfo<std::tuple<Dots256, DType>>& p) {
  const Dots256 d = std::get<0>(p.param);
  const char* kind = d == Dots256::pairs ? "pairs" : d == Dots256::avx_vnni ? "avx_vnni" : "avx512_vnni";
  return std::string(kind) + "_" + std::string(dtype_name(std::get<1>(p.param)));
}

INSTANTIATE_TEST_SUITE_P(QuantTypes, MatmulPackedAvx2,
                         testing::Combine(testing::Values(Dots256::pairs, Dots256::avx_vnni, Dots256::avx512_vnni),
                                          testing::ValuesIn(test::kInt8Types)),
                         param_name);

// The int8 layout is repacked for the AVX2 kernels as for VNNI, for every
// quantized type; not for a forced scalar path, nor for 16- and 32-bit
// weights.
TEST(MatmulPackedAvx2Availability, EveryQuantizedTypeOnAvx2AndNoneOnScalar) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "this CPU has no AVX2";
  {
    const ForcedIsa avx2(Isa::avx2);
    for (DType t : test::kInt8Types) EXPECT_TRUE(kernels::int8_packing_available(t)) << dtype_name(t);
    EXPECT_FALSE(kernels::int8_packing_available(DType::f16));
    EXPECT_FALSE(kernels::int8_packing_available(DType::f32));
  }
  const ForcedIsa scalar(Isa::scalar);
  EXPECT_FALSE(kernels::int8_packing_available(DType::q4_K));
}

}  // namespace
}  // namespace troupe
