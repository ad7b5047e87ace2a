// matmul over weights repacked for the int8 path (kernels/cpu/int8_packed.hpp)
// for every quantized weight type: the same two references as the unpacked
// int8 path (int8_reference.hpp), and the property the layout exists for:
// a token's outputs are the same bits whatever the batch around it (decode
// GEMV or prefill GEMM), the thread count, and with or without AMX.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/thread_pool.hpp"
#include "int8_reference.hpp"
#include "kernels/cpu/int8_packed.hpp"

namespace troupe {
namespace {

using test::AmxSwitch;
using test::kRelTol;

struct Packed {
  std::unique_ptr<uint8_t, decltype(&std::free)> bytes{nullptr, &std::free};
};

Packed pack(const test::Weights& w, DType t, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  const int64_t n = kernels::int8_packed_bytes(t, n_in, n_out);
  Packed p;
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
    for (int64_t n_out : {5, 101}) {  // partial groups of 16 and row units of 48
      const test::Weights w = test::make_weights(rng, t, n_out, n_in);
      const Packed p = pack(w, t, n_in, n_out, pool);
      for (int64_t n_tokens : {1, 3, 6, 17, 40}) {
        std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_tokens * n_in), -1.0f, 1.0f);
        for (int64_t i = 0; i < n_tokens * n_in; i += 64) x[static_cast<size_t>(i)] *= 9.0f;
        std::fill(x.begin(), x.begin() + 32, 0.0f);
        const test::Expected e = test::expected(x, w, n_tokens, n_in, n_out);
        for (bool amx : test::amx_settings()) {
          const AmxSwitch use_amx(amx);
          std::vector<float> y(static_cast<size_t>(n_tokens * n_out), std::nanf(""));
          kernels::matmul_int8_packed(y.data(), x.data(), p.bytes.get(), t, n_tokens, n_in, n_out, pool);
          test::expect_int8_result(y, e, n_out, std::string(dtype_name(t)) + (amx ? " amx" : " vnni") + " n_tokens " +
                                                    std::to_string(n_tokens) + " n_in " + std::to_string(n_in) +
                                                    " n_out " + std::to_string(n_out));
        }
      }
    }
  }
}

TEST_P(MatmulPacked, ATokensOutputsDoNotDependOnTheBatchThreadsOrAmx) {
  if (!test::int8_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: no int8 repacking";
  const DType t = GetParam();
  std::mt19937 rng(97 + static_cast<unsigned>(t));
  const int64_t n_in = 512, n_out = 150;
  ThreadPool pool1(1), pool2(2), pool3(3);
  const test::Weights w = test::make_weights(rng, t, n_out, n_in);
  const Packed p = pack(w, t, n_in, n_out, pool2);
  const int64_t n_max = 40;
  const std::vector<float> x = test::random_floats(rng, static_cast<size_t>(n_max * n_in), -1.0f, 1.0f);
  // Token 0 alone (decode) is the reference for every batch that starts with it.
  std::vector<float> alone(static_cast<size_t>(n_out));
  kernels::matmul_int8_packed(alone.data(), x.data(), p.bytes.get(), t, 1, n_in, n_out, pool1);
  for (bool amx : test::amx_settings()) {
    const AmxSwitch use_amx(amx);
    for (int64_t n_tokens : {2, 5, 16, 17, 40}) {
      for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
        std::vector<float> y(static_cast<size_t>(n_tokens * n_out));
        kernels::matmul_int8_packed(y.data(), x.data(), p.bytes.get(), t, n_tokens, n_in, n_out, *pool);
        EXPECT_EQ(0, std::memcmp(y.data(), alone.data(), alone.size() * sizeof(float)))
            << dtype_name(t) << " n_tokens " << n_tokens << " threads " << pool->size() << (amx ? " amx" : "");
      }
    }
  }
}

// The packed layout keeps the GGUF sizes for the 4-bit and 8-bit types that
// carry most weights (the header comment's table).
TEST(MatmulPacked, SizesAgainstGguf) {
  if (!test::int8_path_runs()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI: no int8 repacking";
  const int64_t n_in = 4096, n_out = 4096;
  auto ratio = [&](DType t) {
    return double(kernels::int8_packed_bytes(t, n_in, n_out)) / double(row_bytes(t, n_in) * n_out);
  };
  EXPECT_DOUBLE_EQ(ratio(DType::q4_0), 1.0);
  EXPECT_DOUBLE_EQ(ratio(DType::q4_1), 1.0);
  EXPECT_DOUBLE_EQ(ratio(DType::q8_0), 1.0);
  EXPECT_LT(ratio(DType::q4_K), 1.03);
  EXPECT_LT(ratio(DType::q6_K), 1.32);  // its header padded to whole cache lines
}

INSTANTIATE_TEST_SUITE_P(QuantTypes, MatmulPacked, testing::ValuesIn(test::kInt8Types),
                         [](const testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

}  // namespace
}  // namespace troupe
