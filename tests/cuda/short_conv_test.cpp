// LFM2's short convolution on the GPU against the CPU kernel on the same
// batch: a prefill chunk whose taps reach into rows of earlier calls, a
// decode token, a sequence shorter than the kernel, in shuffled blocks of a
// cache whose unused bytes are NaN (a stray read poisons the output), for
// every cache type. The cache rows must match the CPU's bit for bit (f32,
// f16, bf16; q8_0 within one step of the row's scale, in case a tie rounds
// the other way) and the outputs to 1e-5 relative: the same products, summed
// in the same order.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu_kernels.hpp"
#include "memory/kv_type.hpp"

namespace troupe {
namespace {

using test::DeviceFloats;

void run(CudaBackend& gpu, KvType type, int64_t taps, bool with_bias) {
  SCOPED_TRACE(std::string(kv_type_name(type)) + " taps " + std::to_string(taps));
  std::mt19937 rng(17);
  const int64_t e = 96, block = 4, n_blocks = 12;
  struct Spec {
    int32_t n_past, n_q;
  };
  const Spec specs[] = {{5, 6}, {9, 1}, {0, 2}};
  std::vector<int32_t> phys(n_blocks);
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);

  const int64_t row_bytes = kv_row_bytes(type, e);
  const size_t cache_bytes = static_cast<size_t>(n_blocks * block * row_bytes);
  std::vector<float> cache((cache_bytes + 3) / 4);
  std::memset(cache.data(), 0xff, cache.size() * sizeof(float));
  auto* bytes = reinterpret_cast<unsigned char*>(cache.data());
  std::vector<std::vector<int32_t>> tables(3);
  std::vector<AttnSeq> seqs(3);
  int32_t n_tokens = 0;
  int64_t next = 0;
  std::vector<float> row(static_cast<size_t>(e));
  for (int i = 0; i < 3; ++i) {
    const int64_t nb = (specs[i].n_past + specs[i].n_q + block - 1) / block;
    tables[i].assign(phys.begin() + next, phys.begin() + next + nb);
    next += nb;
    for (int32_t p = 0; p < specs[i].n_past; ++p) {  // the history earlier calls wrote
      row = test::random_floats(rng, static_cast<size_t>(e), -2.0f, 2.0f);
      kv_quantize_row(type, row.data(), bytes + (tables[i][p / block] * block + p % block) * row_bytes, e);
    }
    seqs[i] = {.q_begin = n_tokens, .n_q = specs[i].n_q, .n_past = specs[i].n_past, .block_table = tables[i].data()};
    n_tokens += specs[i].n_q;
  }
  const auto bcx = test::random_floats(rng, static_cast<size_t>(n_tokens * 3 * e), -1.5f, 1.5f);
  const auto w = test::random_floats(rng, static_cast<size_t>(e * taps), -1.0f, 1.0f);
  const auto bias = test::random_floats(rng, static_cast<size_t>(e), -0.5f, 0.5f);

  DeviceFloats dcache(gpu, cache), dbcx(gpu, bcx), dw(gpu, w), db(gpu, bias), dy(gpu, static_cast<size_t>(n_tokens * e));
  const PagedKvView gview{.k = dcache.get(), .n_blocks = n_blocks, .block_size = block, .n_head_kv = 1, .head_dim = e,
                          .type = type};
  gpu.short_conv(dy.get(), dbcx.get(), gview, seqs.data(), 3, dw.get(), with_bias ? db.get() : nullptr, taps);

  PagedKvView cview = gview;
  cview.k = cache.data();
  std::vector<float> want(static_cast<size_t>(n_tokens * e));
  ThreadPool pool(2);
  kernels::short_conv(want.data(), bcx.data(), cview, seqs.data(), 3, w.data(), with_bias ? bias.data() : nullptr, taps,
                      pool);

  const std::vector<float> got_cache = dcache.read();
  if (type != KvType::q8_0) {
    EXPECT_EQ(std::memcmp(got_cache.data(), cache.data(), cache_bytes), 0) << "cache bytes differ";
  } else {
    std::vector<float> a(static_cast<size_t>(e)), b(static_cast<size_t>(e));
    for (int i = 0; i < 3; ++i) {
      for (int32_t p = specs[i].n_past; p < specs[i].n_past + specs[i].n_q; ++p) {
        const int64_t off = (tables[i][p / block] * block + p % block) * row_bytes;
        kv_dequantize_row(type, reinterpret_cast<const unsigned char*>(got_cache.data()) + off, a.data(), e);
        kv_dequantize_row(type, bytes + off, b.data(), e);
        for (int64_t c = 0; c < e; ++c) EXPECT_NEAR(a[c], b[c], 0.05f) << "row " << p << " channel " << c;
      }
    }
  }
  EXPECT_LE(test::worst_ratio(dy.read(), want, 1e-5, 1e-5), 1.0);
}

TEST(CudaShortConv, MatchesTheCpuOnEveryCacheType) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  for (const KvType t : {KvType::f32, KvType::f16, KvType::bf16, KvType::q8_0}) run(gpu, t, 3, true);
  run(gpu, KvType::f32, 7, false);  // a wider kernel, no bias
  run(gpu, KvType::f16, 1, false);
}

TEST(CudaShortConv, RefusesRowsQ8CannotHold) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  DeviceFloats cache(gpu, 1024), x(gpu, 3 * 40), w(gpu, 3 * 40), y(gpu, 40);
  const std::vector<int32_t> table = {0};
  const AttnSeq seq{.q_begin = 0, .n_q = 1, .n_past = 0, .block_table = table.data()};
  const PagedKvView view{.k = cache.get(), .n_blocks = 1, .block_size = 4, .n_head_kv = 1, .head_dim = 40,
                         .type = KvType::q8_0};
  EXPECT_THROW(gpu.short_conv(y.get(), x.get(), view, &seq, 1, w.get(), nullptr, 3), Error);
}

}  // namespace
}  // namespace troupe
