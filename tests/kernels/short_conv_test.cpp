// The short convolution over the paged cache (kernels/cpu/short_conv.cpp)
// against a plain convolution of whole sequences: scattered blocks, prompts
// fed in chunks (so taps reach back into rows written by earlier calls),
// sequences shorter than the kernel, every cache type, and bad tables.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "isa_paths.hpp"
#include "kernels/cpu_kernels.hpp"
#include "memory/kv_type.hpp"

namespace troupe {
namespace {

constexpr int64_t kE = 40;  // channels: not a multiple of 32, so q8_0 rows end in a short group
constexpr int64_t kBlock = 4;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// y[t] = C[t] * (bias + sum_k w[k] * B[t'] x[t']), t' = t - taps + 1 + k,
// for one whole sequence bcx [n, 3, E].
std::vector<float> reference(const std::vector<float>& bcx, int64_t n, const std::vector<float>& w,
                             const std::vector<float>& bias, int64_t taps) {
  std::vector<float> y(static_cast<size_t>(n * kE));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < kE; ++c) {
      double acc = bias.empty() ? 0.0 : bias[static_cast<size_t>(c)];
      for (int64_t k = 0; k < taps; ++k) {
        const int64_t p = t - taps + 1 + k;
        if (p < 0) continue;
        const float* row = bcx.data() + p * 3 * kE;
        acc += static_cast<double>(w[static_cast<size_t>(c * taps + k)]) * row[c] * row[2 * kE + c];
      }
      y[static_cast<size_t>(t * kE + c)] = static_cast<float>(bcx[static_cast<size_t>(t * 3 * kE + kE + c)] * acc);
    }
  }
  return y;
}

struct Cache {
  std::vector<unsigned char> bytes;
  PagedKvView view;
  Cache(KvType type, int64_t n_blocks) {
    view = PagedKvView{.n_blocks = n_blocks, .block_size = kBlock, .n_head_kv = 1, .head_dim = kE, .type = type};
    bytes.assign(static_cast<size_t>(n_blocks * view.block_bytes()), 0xAB);  // garbage, as a reused block holds
    view.k = bytes.data();
  }
};

constexpr int64_t kLens[2] = {11, 2};  // the second is shorter than most kernels

// Each sequence's [n, 3, E] input, the weights [E, taps] and the bias.
struct Inputs {
  std::vector<std::vector<float>> bcx;
  std::vector<float> w, bias;
};
Inputs make_inputs(int64_t taps, bool with_bias) {
  Inputs in;
  for (int s = 0; s < 2; ++s) in.bcx.push_back(random_floats(static_cast<size_t>(kLens[s] * 3 * kE), 7 + s));
  in.w = random_floats(static_cast<size_t>(kE * taps), 11);
  if (with_bias) in.bias = random_floats(kE, 13);
  return in;
}

// Two sequences fed in chunks of `chunk` tokens per call, batched together,
// through blocks handed out in scrambled order: each one's outputs, and the
// cache's bytes after the last call.
struct Chunked {
  std::vector<std::vector<float>> got;
  std::vector<unsigned char> cache;
};
Chunked conv_chunked(const Inputs& x, KvType type, int64_t taps, int64_t chunk) {
  const std::vector<int32_t> tables[2] = {{5, 0, 3}, {2}};
  Cache cache(type, 6);
  ThreadPool pool(2);

  std::vector<std::vector<float>> got(2);
  for (int s = 0; s < 2; ++s) got[s].assign(static_cast<size_t>(kLens[s] * kE), NAN);
  for (int64_t done = 0; done < kLens[0]; done += chunk) {
    std::vector<AttnSeq> seqs;
    std::vector<float> in;
    std::vector<std::pair<int, int64_t>> rows;  // (sequence, position) of each row
    for (int s = 0; s < 2; ++s) {
      const int64_t n = std::min(chunk, kLens[s] - done);
      if (n <= 0) continue;
      seqs.push_back(AttnSeq{.q_begin = static_cast<int32_t>(rows.size()), .n_q = static_cast<int32_t>(n),
                             .n_past = static_cast<int32_t>(done), .block_table = tables[s].data()});
      for (int64_t j = 0; j < n; ++j) {
        rows.emplace_back(s, done + j);
        const float* src = x.bcx[s].data() + (done + j) * 3 * kE;
        in.insert(in.end(), src, src + 3 * kE);
      }
    }
    std::vector<float> y(rows.size() * kE);
    kernels::short_conv(y.data(), in.data(), cache.view, seqs.data(), static_cast<int>(seqs.size()), x.w.data(),
                        x.bias.empty() ? nullptr : x.bias.data(), taps, pool);
    for (size_t r = 0; r < rows.size(); ++r) {
      std::copy_n(y.data() + r * kE, kE, got[rows[r].first].data() + rows[r].second * kE);
    }
  }
  return {std::move(got), std::move(cache.bytes)};
}

void run_chunked(KvType type, int64_t taps, bool with_bias, int64_t chunk, float tolerance) {
  SCOPED_TRACE(std::string(kv_type_name(type)) + " taps " + std::to_string(taps) + " chunk " + std::to_string(chunk));
  const Inputs x = make_inputs(taps, with_bias);
  const std::vector<std::vector<float>> got = conv_chunked(x, type, taps, chunk).got;
  for (int s = 0; s < 2; ++s) {
    const auto want = reference(x.bcx[s], kLens[s], x.w, x.bias, taps);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[s][i], want[i], tolerance * (1.0f + std::fabs(want[i]))) << "sequence " << s << " value " << i;
    }
  }
}

TEST(ShortConv, MatchesAPlainConvolutionInAnyChunking) {
  for (const int64_t taps : {1, 3, 4, 7}) {
    for (const int64_t chunk : {1, 3, 11}) run_chunked(KvType::f32, taps, /*with_bias=*/taps == 3, chunk, 1e-5f);
  }
}

// Rounded caches: the history is stored rounded, so the bound is the type's
// rounding of b*x (products of two unit normals, so |b*x| is a few at most).
TEST(ShortConv, QuantizedCachesStayNearTheF32Result) {
  run_chunked(KvType::f16, 3, true, 2, 2e-3f);
  run_chunked(KvType::bf16, 3, true, 2, 2e-2f);
  run_chunked(KvType::q8_0, 3, true, 2, 4e-2f);
}

// The cache rows are converted by each ISA's code (the KV tile table) and
// the convolution itself is portable, so every ISA writes the same bytes and
// gives the same outputs as the portable conversion.
TEST(ShortConv, QuantizedCachesGiveTheSameBitsOnEveryIsa) {
  const Inputs x = make_inputs(4, true);
  for (KvType type : {KvType::f16, KvType::bf16, KvType::q8_0}) {
    Chunked want;
    {
      const test::ForcedIsa forced(Isa::scalar);
      want = conv_chunked(x, type, 4, 3);
    }
    for (Isa isa : test::runnable_isas()) {
      SCOPED_TRACE(std::string(kv_type_name(type)) + ", " + std::string(isa_name(isa)));
      const test::ForcedIsa forced(isa);
      const Chunked got = conv_chunked(x, type, 4, 3);
      EXPECT_EQ(got.cache, want.cache);
      for (int s = 0; s < 2; ++s) {
        for (size_t i = 0; i < want.got[s].size(); ++i) {
          ASSERT_EQ(got.got[s][i], want.got[s][i]) << "sequence " << s << " value " << i;
        }
      }
    }
  }
}

// A prompt in one call or one token at a time writes the same cache rows
// and gives the same outputs, bit for bit: the convolution reads this step's
// tokens back from the cache as it reads the history.
TEST(ShortConv, ChunkingChangesNoBit) {
  const int64_t n = 9, taps = 3;
  const auto bcx = random_floats(static_cast<size_t>(n * 3 * kE), 21);
  const auto w = random_floats(static_cast<size_t>(kE * taps), 22);
  const std::vector<int32_t> table = {1, 0, 2};
  ThreadPool pool(2);
  Cache whole(KvType::f16, 3), steps(KvType::f16, 3);
  std::vector<float> y_whole(static_cast<size_t>(n * kE)), y_steps(static_cast<size_t>(n * kE));
  const AttnSeq all{.q_begin = 0, .n_q = static_cast<int32_t>(n), .n_past = 0, .block_table = table.data()};
  kernels::short_conv(y_whole.data(), bcx.data(), whole.view, &all, 1, w.data(), nullptr, taps, pool);
  for (int32_t t = 0; t < n; ++t) {
    const AttnSeq one{.q_begin = 0, .n_q = 1, .n_past = t, .block_table = table.data()};
    kernels::short_conv(y_steps.data() + t * kE, bcx.data() + t * 3 * kE, steps.view, &one, 1, w.data(), nullptr,
                        taps, pool);
  }
  EXPECT_EQ(y_whole, y_steps);
  const size_t used = static_cast<size_t>(whole.view.block_bytes());
  for (const int32_t b : table) {
    const size_t at = static_cast<size_t>(b) * used;
    // Block 2 holds position 8 only; the rest of it is never written.
    const size_t bytes = b == 2 ? static_cast<size_t>(whole.view.slot_bytes()) : used;
    EXPECT_TRUE(std::equal(whole.bytes.begin() + at, whole.bytes.begin() + at + bytes, steps.bytes.begin() + at));
  }
}

TEST(ShortConv, RefusesBadTablesAndViews) {
  ThreadPool pool(1);
  Cache cache(KvType::f32, 2);
  const auto bcx = random_floats(3 * kE, 1);
  const auto w = random_floats(3 * kE, 2);
  std::vector<float> y(kE);
  const std::vector<int32_t> bad = {0, 7};  // position 4's block is outside the cache
  const AttnSeq past_the_end{.q_begin = 0, .n_q = 1, .n_past = 4, .block_table = bad.data()};
  EXPECT_THROW(kernels::short_conv(y.data(), bcx.data(), cache.view, &past_the_end, 1, w.data(), nullptr, 3, pool),
               Error);
  // Position 4 itself is in a good block, but the history it reads
  // (positions 2 and 3) is in logical block 0, which is -1.
  const std::vector<int32_t> history_bad = {-1, 0, 1};
  const AttnSeq reads_bad{.q_begin = 0, .n_q = 1, .n_past = 4, .block_table = history_bad.data()};
  EXPECT_THROW(kernels::short_conv(y.data(), bcx.data(), cache.view, &reads_bad, 1, w.data(), nullptr, 3, pool),
               Error);
  PagedKvView two_rows = cache.view;
  two_rows.n_head_kv = 2;
  const std::vector<int32_t> ok = {0};
  const AttnSeq seq{.q_begin = 0, .n_q = 1, .n_past = 0, .block_table = ok.data()};
  EXPECT_THROW(kernels::short_conv(y.data(), bcx.data(), two_rows, &seq, 1, w.data(), nullptr, 3, pool), Error);
  EXPECT_THROW(kernels::short_conv(y.data(), bcx.data(), cache.view, &seq, 1, w.data(), nullptr, 0, pool), Error);
}

}  // namespace
}  // namespace troupe
