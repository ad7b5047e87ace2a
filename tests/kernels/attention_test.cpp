// kv_write and paged causal grouped-query attention against a plain
// double-precision softmax(q k^T * scale) v over unpaged copies of K and V.
// Block tables are shuffled permutations of the physical blocks, unused
// slots hold NaN (any stray read poisons the output), and each batch mixes
// prefill, chunked prefill, decode and empty sequences. Tolerance: 1e-5
// absolute on outputs in [-1, 1].
//
// Quantized caches (f16, bf16, q8_0) are checked twice: kv_write must store
// exactly the bytes of the reference row quantizer (memory/kv_type), and
// attention must match the double reference over the dequantized rows to the
// same 1e-5 (the kernel dequantizes in registers but computes the same
// values). Separately, the error against the exact f32 cache is bounded per
// type by its rounding step (see QuantizedCacheStaysNearF32).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention_reference.hpp"
#include "core/error.hpp"
#include "isa_paths.hpp"
#include "kernels/cpu/attention_lanes.hpp"
#include "kernels/cpu_kernels.hpp"
#include "memory/kv_type.hpp"

namespace troupe {
namespace {

using test::Case;
using test::kNan;
using test::run_case;
using test::SeqSpec;

// A batch with a fresh prefill, a chunked prefill continuing a history, two
// decodes, a first-token decode and an idle sequence, in shuffled order.
std::vector<SeqSpec> random_batch(std::mt19937& rng) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<SeqSpec> b = {{0, uni(1, 40)}, {uni(1, 40), uni(2, 20)}, {uni(1, 150), 1}, {uni(1, 70), 1}, {0, 1},
                            {uni(0, 30), 0}};
  std::shuffle(b.begin(), b.end(), rng);
  return b;
}

TEST(Attention, MatchesReferenceAcrossLayoutsRatiosWindowsAndIsas) {
  std::mt19937 rng(2024);
  uint32_t seed = 1;
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (int64_t ratio : {1, 2, 4}) {
      for (int64_t block_size : {16, 4}) {
        for (int32_t window : {0, 9}) {
          for (int64_t head_dim : {64, 128, 8, 13}) {
            const Case c{.type = KvType::f32,
                         .n_head = 2 * ratio,
                         .n_head_kv = 2,
                         .head_dim = head_dim,
                         .block_size = block_size,
                         .window = window,
                         .threads = seed % 2 == 0 ? 1 : 3,
                         .q_scale = seed % 3 == 0 ? 6.0f : 1.0f,
                         .seqs = random_batch(rng)};
            run_case(c, isa, seed++);
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

// An encoder's bidirectional attention: each query sees every key of its
// sequence, later ones included, on the lane and tile kernels, f32 and
// quantized caches, one thread and several.
TEST(Attention, BidirectionalQueriesSeeTheWholeSequence) {
  std::mt19937 rng(77);
  uint32_t seed = 700;
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (KvType type : {KvType::f32, KvType::f16, KvType::q8_0}) {
      for (int64_t head_dim : {32, 64}) {
        const Case c{.type = type,
                     .n_head = 4,
                     .n_head_kv = 4,
                     .head_dim = head_dim,
                     .block_size = 16,
                     .window = 0,
                     .threads = seed % 2 == 0 ? 1 : 3,
                     .q_scale = 2.0f,
                     .seqs = {{0, std::uniform_int_distribution<int>(2, 60)(rng)}, {0, 1}, {0, 37}},
                     .causal = false};
        run_case(c, isa, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// ModernBERT's local layers: each query sees the positions less than
// `window` away on either side, on the lane kernel (long rows) and the tile
// kernels (a one-token sequence).
TEST(Attention, BidirectionalWindowReachesBothWays) {
  std::mt19937 rng(78);
  uint32_t seed = 750;
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (KvType type : {KvType::f32, KvType::f16, KvType::q8_0}) {
      for (int32_t window : {1, 5, 65}) {
        const Case c{.type = type,
                     .n_head = 4,
                     .n_head_kv = 2,
                     .head_dim = 32,
                     .block_size = 16,
                     .window = window,
                     .threads = seed % 2 == 0 ? 1 : 3,
                     .q_scale = 2.0f,
                     .seqs = {{0, std::uniform_int_distribution<int>(20, 90)(rng)}, {0, 1}, {0, 9}},
                     .causal = false};
        run_case(c, isa, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Gemma 2's soft-capping of the scores, on decode and prefill rows (the
// tile kernels: the lane kernel steps aside), with sharp rows the cap flattens.
TEST(Attention, SoftCappedScores) {
  std::mt19937 rng(50);
  uint32_t seed = 300;
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (KvType type : {KvType::f32, KvType::q8_0}) {
      for (int32_t window : {0, 9}) {
        const Case c{.type = type,
                     .n_head = 8,
                     .n_head_kv = 4,
                     .head_dim = 64,
                     .block_size = 16,
                     .window = window,
                     .threads = 2,
                     .q_scale = 6.0f,
                     .seqs = random_batch(rng),
                     .softcap = 2.0f};
        run_case(c, isa, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// gpt-oss's sinks on decode rows (the tile kernels) and prefill rows (the
// lane kernels), with windows, quantized caches and sharp rows.
TEST(Attention, SinksJoinTheDenominator) {
  std::mt19937 rng(51);
  uint32_t seed = 400;
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (KvType type : {KvType::f32, KvType::f16, KvType::q8_0}) {
      for (int32_t window : {0, 9}) {
        const Case c{.type = type,
                     .n_head = 8,
                     .n_head_kv = 2,
                     .head_dim = 64,
                     .block_size = 16,
                     .window = window,
                     .threads = seed % 2 == 0 ? 1 : 3,
                     .q_scale = seed % 3 == 0 ? 6.0f : 1.0f,
                     .seqs = random_batch(rng),
                     .sinks = true};
        run_case(c, isa, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(Attention, OddGroupSizesAndMultiQuery) {
  std::mt19937 rng(77);
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    // group 6 (MQA), 7 and 3 exercise head chunks that are not powers of two.
    for (auto [n_head, n_head_kv] : {std::pair<int64_t, int64_t>{6, 1}, {14, 2}, {3, 1}}) {
      const Case c{.n_head = n_head,
                   .n_head_kv = n_head_kv,
                   .head_dim = 32,
                   .block_size = 16,
                   .window = 0,
                   .threads = 2,
                   .q_scale = 2.0f,
                   .seqs = random_batch(rng)};
      run_case(c, isa, 99);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(Attention, LongContextDecodeAndSlidingWindow) {
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (int32_t window : {0, 256}) {
      const Case c{.n_head = 8,
                   .n_head_kv = 2,
                   .head_dim = 64,
                   .block_size = 16,
                   .window = window,
                   .threads = 2,
                   .q_scale = 3.0f,
                   .seqs = {{1500, 1}, {700, 3}, {1023, 1}}};
      run_case(c, isa, 5);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(Attention, QuantizedCachesMatchReferenceOnEveryIsa) {
  std::mt19937 rng(4242);
  uint32_t seed = 300;
  for (KvType type : {KvType::f16, KvType::bf16, KvType::q8_0}) {
    for (Isa isa : test::runnable_isas()) {
      test::ForcedIsa forced(isa);
      // 8 and 13: one short q8_0 group; 40 and 80: whole groups plus a short
      // one; 64 and 128: the unrolled paths.
      for (int64_t head_dim : {64, 128, 8, 13, 40, 80}) {
        for (int64_t ratio : {1, 4}) {
          const Case c{.type = type,
                       .n_head = 2 * ratio,
                       .n_head_kv = 2,
                       .head_dim = head_dim,
                       .block_size = seed % 2 == 0 ? 16 : 4,
                       .window = seed % 3 == 0 ? 9 : 0,
                       .threads = seed % 2 == 0 ? 1 : 3,
                       .q_scale = seed % 5 == 0 ? 6.0f : 1.0f,
                       .seqs = random_batch(rng)};
          run_case(c, isa, seed++);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(Attention, QuantizedLongContextDecode) {
  for (KvType type : {KvType::f16, KvType::bf16, KvType::q8_0}) {
    for (Isa isa : test::runnable_isas()) {
      test::ForcedIsa forced(isa);
      const Case c{.type = type,
                   .n_head = 8,
                   .n_head_kv = 2,
                   .head_dim = 64,
                   .block_size = 16,
                   .window = 0,
                   .threads = 2,
                   .q_scale = 3.0f,
                   .seqs = {{1500, 1}, {700, 3}}};
      run_case(c, isa, 11);
      if (HasFatalFailure()) return;
    }
  }
}

// How far a quantized cache moves attention from the exact f32 one. With
// every key and value rounded by at most dk, dv (measured), a query row's
// scores move by at most eps = scale * |q|_1 * dk; softmax weights then move
// by a factor within exp(+-2 eps), so the output moves by at most
// dv + (exp(2 eps) - 1) * max|v|. The test asserts that bound, and that the
// observed error is far below it for q8_0 (errors of random signs cancel).
TEST(Attention, QuantizedCacheStaysNearF32) {
  const test::AmxSwitch f32_lanes(false);  // the bound is the cache's rounding alone
  const int64_t n_head = 4, n_head_kv = 2, d = 64, bs = 16, n_tok = 300;
  std::mt19937 rng(8);
  const auto k = test::random_floats(rng, n_tok * n_head_kv * d, -1.0f, 1.0f);
  const auto v = test::random_floats(rng, n_tok * n_head_kv * d, -1.0f, 1.0f);
  const auto q = test::random_floats(rng, n_tok * n_head * d, -1.0f, 1.0f);
  std::vector<int32_t> table((n_tok + bs - 1) / bs);
  std::iota(table.begin(), table.end(), 0);
  const AttnSeq seq{.q_begin = 0, .n_q = static_cast<int32_t>(n_tok), .n_past = 0, .block_table = table.data()};
  const float scale = 1.0f / std::sqrt(float(d));
  ThreadPool pool(2);
  auto run = [&](KvType type) {
    const int64_t bytes = static_cast<int64_t>(table.size()) * bs * n_head_kv * kv_row_bytes(type, d);
    std::vector<unsigned char> kc(bytes), vc(bytes);
    const PagedKvView view{.k = kc.data(), .v = vc.data(), .n_blocks = static_cast<int64_t>(table.size()),
                           .block_size = bs, .n_head_kv = n_head_kv, .head_dim = d, .type = type};
    kernels::kv_write(view, k.data(), v.data(), &seq, 1);
    std::vector<float> out(q.size());
    kernels::attention(out.data(), q.data(), view, &seq, 1, n_head, scale, pool);
    return out;
  };
  const std::vector<float> exact = run(KvType::f32);
  for (KvType type : {KvType::f16, KvType::bf16, KvType::q8_0}) {
    SCOPED_TRACE(kv_type_name(type));
    auto max_round = [&](const std::vector<float>& x) {
      double m = 0;
      std::vector<unsigned char> b(static_cast<size_t>(kv_row_bytes(type, d)));
      std::vector<float> back(static_cast<size_t>(d));
      for (size_t r = 0; r < x.size(); r += static_cast<size_t>(d)) {
        kv_quantize_row(type, x.data() + r, b.data(), d);
        kv_dequantize_row(type, b.data(), back.data(), d);
        for (int64_t e = 0; e < d; ++e) m = std::max(m, std::abs(double(back[e]) - x[r + e]));
      }
      return m;
    };
    const double dk = max_round(k), dv = max_round(v);
    const std::vector<float> got = run(type);
    double worst = 0, worst_bound = 0;
    for (int64_t row = 0; row < n_tok * n_head; ++row) {
      double q1 = 0;
      for (int64_t e = 0; e < d; ++e) q1 += std::abs(q[row * d + e]);
      const double eps = scale * q1 * dk;
      const double bound = dv + std::expm1(2 * eps) * 1.0;  // max|v| <= 1
      for (int64_t e = 0; e < d; ++e) {
        const double err = std::abs(double(got[row * d + e]) - exact[row * d + e]);
        ASSERT_LE(err, bound) << "row " << row << " dim " << e;
        worst = std::max(worst, err);
        worst_bound = std::max(worst_bound, bound);
      }
    }
    // Rounding is not systematic: the observed error stays well inside.
    EXPECT_LT(worst, 0.25 * worst_bound);
    EXPECT_GT(worst, 0.0);  // the cache really is quantized
  }
}

// Prefill items of 8 to 32 rows take the lane kernel (attention_lanes.hpp):
// on AVX-512 in one register up to 16 rows and two above, on AVX2 in one to
// four of 8 rows; wider items (up to 90 queries here) in groups of 32 rows.
// One thread keeps each item whole. Tiles of 32 positions cross pages of 4
// and 16, and windows cut rows inside a tile.
void prefill_items_on_the_lane_path(Isa isa) {
  std::mt19937 rng(515);
  uint32_t seed = 700;
  for (KvType type : {KvType::f32, KvType::f16, KvType::bf16, KvType::q8_0}) {
    for (auto [n_head, n_head_kv] : {std::pair<int64_t, int64_t>{4, 4}, {8, 2}, {6, 2}}) {
      for (int64_t head_dim : {64, 128, 40}) {
        const auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
        const Case c{.type = type,
                     .n_head = n_head,
                     .n_head_kv = n_head_kv,
                     .head_dim = head_dim,
                     .block_size = seed % 2 == 0 ? 16 : 4,
                     .window = seed % 3 == 0 ? 21 : 0,
                     .threads = 1,
                     .q_scale = seed % 4 == 0 ? 6.0f : 1.5f,
                     .seqs = {{0, uni(40, 90)}, {uni(20, 70), uni(9, 33)}, {uni(1, 40), 1}}};
        run_case(c, isa, seed++);
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

TEST(Attention, PrefillItemsOnTheLanePathMatchReference) {
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    if (!isa_supported(isa)) {
      std::printf("[ SKIPPED  ] the %s lane kernel: this CPU has no %s\n", std::string(isa_name(isa)).c_str(),
                  std::string(isa_name(isa)).c_str());
      continue;
    }
    const test::ForcedIsa forced(isa);
    prefill_items_on_the_lane_path(isa);
    if (HasFatalFailure()) return;
  }
}

// Output rows of one sequence at positions [n_past, n_past + n_q) over a
// cache holding the same 64 random keys and values, MHA with 2 heads.
std::vector<float> attend_at(int32_t n_past, int32_t n_q, int threads) {
  const int64_t n_head = 2, d = 64, n_ctx = 64, bs = 16;
  std::mt19937 rng(31);
  const auto k = test::random_floats(rng, n_ctx * n_head * d, -1.0f, 1.0f);
  const auto v = test::random_floats(rng, n_ctx * n_head * d, -1.0f, 1.0f);
  const auto q = test::random_floats(rng, n_ctx * n_head * d, -3.0f, 3.0f);
  std::vector<float> kc(k.size()), vc(v.size());
  const std::vector<int32_t> table = {2, 0, 3, 1};
  const PagedKvView view{.k = kc.data(), .v = vc.data(), .n_blocks = 4, .block_size = bs, .n_head_kv = n_head,
                         .head_dim = d};
  const AttnSeq all{.q_begin = 0, .n_q = static_cast<int32_t>(n_ctx), .n_past = 0, .block_table = table.data()};
  kernels::kv_write(view, k.data(), v.data(), &all, 1);
  const AttnSeq seq{.q_begin = 0, .n_q = n_q, .n_past = n_past, .block_table = table.data()};
  std::vector<float> out(static_cast<size_t>(n_q * n_head * d));
  ThreadPool pool(threads);
  kernels::attention(out.data(), q.data() + n_past * n_head * d, view, &seq, 1, n_head, 0.125f, pool);
  return out;
}

// The lane kernel keeps each row's arithmetic in its own lane: a row gets
// the same bits in an item of 32 rows (two registers) as in one of 17 or 9
// (one register holds 9). Batch-invariant math
// keeps the tile kernels, whose rows match decode (one query) bit for bit.
TEST(Attention, ARowsBitsDoNotDependOnItsItem) {
  const test::AmxSwitch f32_lanes(false);     // the lane kernels' claim
  for (Isa isa : {Isa::avx512, Isa::avx2}) {  // AVX2: 32, 17 and 9 rows are 4, 3 and 2 registers
    if (!isa_supported(isa)) continue;
    const test::ForcedIsa forced(isa);
    const std::vector<float> all = attend_at(32, 32, 1);
    for (int32_t n_q : {17, 9}) {
      const std::vector<float> part = attend_at(32, n_q, 1);
      for (size_t i = 0; i < part.size(); ++i) {
        ASSERT_EQ(part[i], all[i]) << isa_name(isa) << ", " << n_q << " rows, value " << i;
      }
    }
  }

  const test::BatchInvariantMath invariant;
  const std::vector<float> prefill = attend_at(30, 20, 2);
  for (int32_t qi : {0, 7, 19}) {
    const std::vector<float> decode = attend_at(30 + qi, 1, 1);
    for (size_t i = 0; i < decode.size(); ++i) {
      ASSERT_EQ(decode[i], prefill[qi * decode.size() + i]) << "query " << qi << " value " << i;
    }
  }
}

// A wide item (64 rows of a 64-query prefill, one thread: two groups of 32)
// gives each row the bits of the 16-row items that two threads split the
// same prefill into: a group reads the tiles its rows see, in the same
// order, as an item of its rows alone.
TEST(Attention, AWideItemGivesTheBitsOfNarrowOnes) {
  const test::AmxSwitch f32_lanes(false);  // the lane kernels' claim
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    if (!isa_supported(isa)) continue;
    const test::ForcedIsa forced(isa);
    const std::vector<float> wide = attend_at(0, 64, 1);
    const std::vector<float> narrow = attend_at(0, 64, 2);
    ASSERT_EQ(wide.size(), narrow.size());
    for (size_t i = 0; i < wide.size(); ++i) ASSERT_EQ(wide[i], narrow[i]) << isa_name(isa) << ", value " << i;
  }
}

// kv_write's SIMD row stores against kv_quantize_row, byte for byte, over
// the values a random fill never draws: signed zeros, f32 subnormals, f16
// subnormals, ties of f16 and of bf16 (even and odd), values that round to
// f16's infinity, exact q8_0 ties (a group whose amax is 127 has scale 1),
// infinities, and NaNs with payloads and signs; then random bit patterns.
// Head dims 8 and 64 (whole registers), 13 (a tail), 40 (a short q8_0 group).
TEST(Attention, KvWriteStoresTheReferenceBytesForEveryValueClass) {
  auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  const float inf = std::numeric_limits<float>::infinity();
  // clang-format off
  const std::vector<float> special = {
      0.0f, -0.0f, bits(1), bits(0x80000001), 1e-40f,                          // zeros, f32 subnormals
      5.9604645e-8f, 2.9802322e-8f, -8.940697e-8f, 6.1035156e-5f,              // f16 subnormals and a tie
      65504.0f, 65519.0f, 65520.0f, -65520.0f, 1e10f, inf, -inf,               // f16's largest, then infinity
      kNan, bits(0x7fa00001), bits(0xffc00123),                                // NaNs with payloads
      bits(0x3f808000), bits(0x3f818000), bits(0x3f801000), bits(0x3f803000),  // bf16, f16 ties: even, odd
      1.0f};
  // clang-format on
  const std::vector<float> q8_ties = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 126.5f, -1.5f, 3.5f, -126.5f, 0.0f};
  std::mt19937 rng(77);
  for (int64_t d : {8, 13, 40, 64}) {
    // Token rows: the special values from three offsets, the q8_0 ties, then
    // random bit patterns.
    const int64_t n_tok = 8;
    std::vector<float> rows(static_cast<size_t>(n_tok * d));
    for (int64_t j = 0; j < n_tok; ++j) {
      for (int64_t i = 0; i < d; ++i) {
        float& x = rows[j * d + i];
        if (j < 3) {
          x = special[(i + 7 * j) % special.size()];
        } else if (j == 3) {
          x = q8_ties[i % q8_ties.size()];
        } else {
          x = bits(static_cast<uint32_t>(rng()));
        }
      }
    }
    for (KvType type : {KvType::f16, KvType::bf16, KvType::q8_0}) {
      const int64_t rb = kv_row_bytes(type, d);
      std::vector<unsigned char> want(static_cast<size_t>(n_tok * rb));
      for (int64_t j = 0; j < n_tok; ++j) kv_quantize_row(type, rows.data() + j * d, want.data() + j * rb, d);
      for (Isa isa : test::runnable_isas()) {
        SCOPED_TRACE(std::string(kv_type_name(type)) + ", " + std::string(isa_name(isa)) + ", head_dim " +
                     std::to_string(d));
        test::ForcedIsa forced(isa);
        std::vector<unsigned char> kc(want.size(), 0xaa), vc(want.size(), 0xaa);
        const PagedKvView view{.k = kc.data(),
                               .v = vc.data(),
                               .n_blocks = 1,
                               .block_size = n_tok,
                               .n_head_kv = 1,
                               .head_dim = d,
                               .type = type};
        const int32_t table[] = {0};
        const AttnSeq seq{.q_begin = 0, .n_q = static_cast<int32_t>(n_tok), .n_past = 0, .block_table = table};
        kernels::kv_write(view, rows.data(), rows.data(), &seq, 1);
        for (int64_t j = 0; j < n_tok; ++j) {
          const int64_t off = view.byte_offset(0, j, 0);
          for (int64_t b = 0; b < rb; ++b) {
            ASSERT_EQ(kc[off + b], want[j * rb + b]) << "token " << j << ", byte " << b;
            ASSERT_EQ(vc[off + b], want[j * rb + b]) << "token " << j << ", byte " << b;
          }
        }
      }
    }
  }
}

TEST(Attention, RejectsBadBlockTablesAndHeadCounts) {
  std::vector<float> k(2 * 4 * 8, 0.0f), v(k.size(), 0.0f), q(4 * 8, 0.0f), out(q.size());
  const PagedKvView view{.k = k.data(), .v = v.data(), .n_blocks = 2, .block_size = 4, .n_head_kv = 1, .head_dim = 8};
  ThreadPool pool(1);
  const int32_t bad_table[] = {0, 2};  // block 2 does not exist
  const AttnSeq bad{.q_begin = 0, .n_q = 1, .n_past = 4, .block_table = bad_table};
  EXPECT_THROW(kernels::kv_write(view, q.data(), q.data(), &bad, 1), Error);
  EXPECT_THROW(kernels::attention(out.data(), q.data(), view, &bad, 1, 1, 1.0f, pool), Error);
  const int32_t good_table[] = {1};
  const AttnSeq good{.q_begin = 0, .n_q = 1, .n_past = 0, .block_table = good_table};
  EXPECT_NO_THROW(kernels::attention(out.data(), q.data(), view, &good, 1, 1, 1.0f, pool));
  const PagedKvView view2{.k = k.data(), .v = v.data(), .n_blocks = 2, .block_size = 4, .n_head_kv = 2, .head_dim = 4};
  EXPECT_THROW(kernels::attention(out.data(), q.data(), view2, &good, 1, 3, 1.0f, pool), Error);
  EXPECT_THROW(kernels::attention(out.data(), q.data(), view, &good, 1, 1, 1.0f, pool, -1), Error);
  EXPECT_THROW(kernels::attention(out.data(), q.data(), view, &good, 1, 1, 1.0f, pool, 0, -2.0f), Error);
  EXPECT_THROW(kernels::attention(out.data(), q.data(), view, &good, 1, 1, 1.0f, pool, 0, kNan), Error);
}

}  // namespace
}  // namespace troupe
