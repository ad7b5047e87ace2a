// The int8 path's activation quantization (quantize_acts, AVX-512) against a
// scalar reference written from matmul_int8.hpp's definitions: q and d per
// block of 32, the per-sub-block bias and d * sum, the GEMV's per-lane
// arrays and the GEMM's tiled copy, for padded rows and token counts; and
// against quantize_acts_avx2, which the AVX2 kernels use, value for value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/thread_pool.hpp"
#include "int8_reference.hpp"
#include "kernels/cpu/matmul_int8.hpp"

namespace troupe {
namespace {

using kernels::detail::kActTile;
using kernels::detail::kActTokenPad;
using kernels::detail::kInt8GemmMinTokens;
using kernels::detail::kLaneInputs;
using kernels::detail::QuantizedActs;

// matmul_int8.hpp's definitions, one value at a time.
struct ActsReference {
  int64_t ldq, nb, n_sub, padded;
  std::vector<int8_t> q;   // [padded, ldq]
  std::vector<float> d;    // [padded, nb]
  std::vector<int32_t> sum;  // [padded, n_sub]: sum of q over the sub-block
};

ActsReference reference(const std::vector<float>& x, int64_t n_tokens, int64_t n_in, int64_t sub_k, int64_t padded) {
  ActsReference r;
  r.ldq = (n_in + 63) / 64 * 64;
  r.nb = r.ldq / 32;
  r.n_sub = r.ldq / sub_k;
  r.padded = padded;
  r.q.assign(static_cast<size_t>(padded * r.ldq), 0);
  r.d.assign(static_cast<size_t>(padded * r.nb), 0.0f);
  r.sum.assign(static_cast<size_t>(padded * r.n_sub), 0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t b = 0; b < n_in / 32; ++b) {
      const float* xb = x.data() + t * n_in + 32 * b;
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
      for (int i = 0; i < 32; ++i) {
        r.q[static_cast<size_t>(t * r.ldq + 32 * b + i)] = static_cast<int8_t>(std::nearbyint(xb[i] * id));
      }
      r.d[static_cast<size_t>(t * r.nb + b)] = amax / 127.0f;
    }
    for (int64_t k = 0; k < r.n_sub; ++k) {
      int32_t s = 0;
      for (int64_t i = 0; i < sub_k; ++i) s += r.q[static_cast<size_t>(t * r.ldq + k * sub_k + i)];
      r.sum[static_cast<size_t>(t * r.n_sub + k)] = s;
    }
  }
  return r;
}

// The values quantize_acts shares with quantize_acts_avx2, copied out of the
// calling thread's scratch (the next call reuses it).
struct Shared {
  std::vector<int8_t> q;
  std::vector<float> d, sub_dsum;
  std::vector<int32_t> sub_bias;
};

Shared shared(const QuantizedActs& qa) {
  const auto n = static_cast<size_t>(qa.n_tokens);
  return {std::vector<int8_t>(qa.q, qa.q + n * static_cast<size_t>(qa.ldq)),
          std::vector<float>(qa.d, qa.d + n * static_cast<size_t>(qa.nb)),
          std::vector<float>(qa.sub_dsum, qa.sub_dsum + n * static_cast<size_t>(qa.n_sub)),
          std::vector<int32_t>(qa.sub_bias, qa.sub_bias + n * static_cast<size_t>(qa.n_sub))};
}

TEST(QuantizeActs, MatchesTheDefinitionsInEveryLayout) {
  if (!test::int8_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI (the int8 path's quantize_acts)";
  std::mt19937 rng(4242);
  ThreadPool pool(2);
  for (int64_t n_in : {64, 96, 768, 800}) {     // 96, 800: a padding block to the row's 64
    for (int64_t n_tokens : {1, 3, 16, 21, 40}) {  // GEMV rows; GEMM rows with padding tokens
      const std::vector<float> x = test::int8_inputs(rng, n_tokens, n_in);
      for (int64_t sub_k : {16, 32}) {
        for (int32_t offset : {0, 8, 32, 128}) {
          SCOPED_TRACE(testing::Message() << "n_in " << n_in << ", tokens " << n_tokens << ", sub_k " << sub_k
                                          << ", offset " << offset);
          const bool gemm = n_tokens >= kInt8GemmMinTokens;
          const int64_t padded = gemm ? (n_tokens + kActTokenPad - 1) / kActTokenPad * kActTokenPad : n_tokens;
          const ActsReference r = reference(x, n_tokens, n_in, sub_k, padded);
          const QuantizedActs qa =
              kernels::detail::quantize_acts(x.data(), n_tokens, n_in, !gemm, offset, sub_k, &pool);
          ASSERT_EQ(qa.ldq, r.ldq);
          ASSERT_EQ(qa.n_sub, r.n_sub);
          for (int64_t t = 0; t < padded; ++t) {
            for (int64_t i = 0; i < r.ldq; ++i) {
              ASSERT_EQ(qa.q[t * r.ldq + i], r.q[static_cast<size_t>(t * r.ldq + i)]) << "token " << t << ", " << i;
            }
            for (int64_t b = 0; b < r.nb; ++b) {
              ASSERT_EQ(qa.d[t * r.nb + b], r.d[static_cast<size_t>(t * r.nb + b)]) << "token " << t << ", " << b;
            }
            for (int64_t k = 0; k < r.n_sub; ++k) {
              const int32_t s = r.sum[static_cast<size_t>(t * r.n_sub + k)];
              const float dk = r.d[static_cast<size_t>(t * r.nb + k * sub_k / 32)];
              ASSERT_EQ(qa.sub_bias[t * r.n_sub + k], -offset * s) << "token " << t << ", sub-block " << k;
              ASSERT_EQ(qa.sub_dsum[t * r.n_sub + k], dk * static_cast<float>(s)) << "token " << t << ", " << k;
              if (gemm) {
                const auto& ts = qa.tile_sub[(t / kActTile) * r.n_sub + k];
                ASSERT_EQ(ts.bias[t % kActTile], -offset * s) << "token " << t << ", sub-block " << k;
                ASSERT_EQ(ts.d[t % kActTile], dk) << "token " << t << ", sub-block " << k;
                ASSERT_EQ(ts.dsum[t % kActTile], dk * static_cast<float>(s)) << "token " << t << ", " << k;
              }
            }
            const int64_t n_lanes = r.ldq / kLaneInputs;
            for (int64_t l = 0; l < n_lanes; ++l) {
              const int8_t* ql = r.q.data() + t * r.ldq + kLaneInputs * l;
              if (gemm) {  // [tile, lane, token of the tile, 4]
                const int8_t* tq = qa.tile_q + ((t / kActTile) * n_lanes + l) * kActTile * kLaneInputs +
                                   (t % kActTile) * kLaneInputs;
                ASSERT_EQ(std::memcmp(tq, ql, kLaneInputs), 0) << "token " << t << ", lane " << l;
              } else {
                const int32_t s = ql[0] + ql[1] + ql[2] + ql[3];
                const float dl = r.d[static_cast<size_t>(t * r.nb + l / 8)];
                ASSERT_EQ(qa.lane_bias[t * n_lanes + l], -offset * s) << "token " << t << ", lane " << l;
                ASSERT_EQ(qa.lane_d[t * n_lanes + l], dl) << "token " << t << ", lane " << l;
                ASSERT_EQ(qa.lane_dsum[t * n_lanes + l], dl * static_cast<float>(s)) << "token " << t << ", " << l;
              }
            }
          }
          const Shared vnni = shared(qa);
          const Shared avx2 = shared(kernels::detail::quantize_acts_avx2(x.data(), n_tokens, n_in, offset, sub_k));
          EXPECT_EQ(vnni.q, avx2.q);
          EXPECT_EQ(vnni.d, avx2.d);
          EXPECT_EQ(vnni.sub_bias, avx2.sub_bias);
          EXPECT_EQ(vnni.sub_dsum, avx2.sub_dsum);
        }
      }
    }
  }
}

}  // namespace
}  // namespace troupe
