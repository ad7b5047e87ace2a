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

#include "core/error.hpp"
#include "isa_paths.hpp"
#include "kernels/cpu/attention_lanes.hpp"
#include "kernels/cpu_kernels.hpp"
#include "memory/kv_type.hpp"

namespace troupe {
namespace {

constexpr double kTol = 1e-5;
const float kNan = std::numeric_limits<float>::quiet_NaN();

struct SeqSpec {
  int32_t n_past;
  int32_t n_q;
  // (begin, end) positions of blocks whose queries see the whole block
  // (AttnSeq::key_end: Gemma 3's images); each ends among the new tokens.
  std::vector<int32_t> open = {};
};

// AttnSeq::key_end of a sequence with open blocks: each query's own end, or
// its block's.
std::vector<int32_t> key_ends(const SeqSpec& s) {
  std::vector<int32_t> ends(static_cast<size_t>(s.n_q));
  for (int32_t i = 0; i < s.n_q; ++i) ends[i] = s.n_past + i + 1;
  for (size_t j = 0; j + 1 < s.open.size(); j += 2) {
    for (int32_t p = std::max(s.open[j], s.n_past); p < s.open[j + 1]; ++p) ends[p - s.n_past] = s.open[j + 1];
  }
  return ends;
}

struct Case {
  KvType type = KvType::f32;
  int64_t n_head;
  int64_t n_head_kv;
  int64_t head_dim;
  int64_t block_size;
  int32_t window;
  int threads;
  float q_scale;  // larger values give sharper softmax rows
  std::vector<SeqSpec> seqs;
  float softcap = 0.0f;  // Gemma 2's score cap; 0: off
  bool sinks = false;    // gpt-oss's attention sinks: a random logit per head
  bool causal = true;    // false: every query sees its whole sequence (an encoder)
  // The AMX-BF16 prefill (attention_amx.cpp) for sequences of
  // cpu::kAmxMinQueries or more: checked against a reference over the
  // values it rounds to bf16. Off: the f32 kernels, AMX turned off.
  bool amx = false;
};

// Round to nearest even, as vcvtneps2bf16.
float bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

std::string describe(const Case& c, Isa isa) {
  return std::string(isa_name(isa)) + " kv=" + kv_type_name(c.type) + " n_head=" + std::to_string(c.n_head) +
         " n_head_kv=" + std::to_string(c.n_head_kv) + " head_dim=" + std::to_string(c.head_dim) +
         " block_size=" + std::to_string(c.block_size) + " window=" + std::to_string(c.window) +
         " threads=" + std::to_string(c.threads) + " softcap=" + std::to_string(c.softcap) +
         " sinks=" + (c.sinks ? "yes" : "no") + " causal=" + (c.causal ? "yes" : "no");
}

void run_case(const Case& c, Isa isa, uint32_t seed) {
  SCOPED_TRACE(describe(c, isa));
  std::mt19937 rng(seed);
  const int64_t d = c.head_dim;
  const int64_t kv_row = c.n_head_kv * d;
  const int n_seqs = static_cast<int>(c.seqs.size());

  // Logical (unpaged) K and V of every sequence: [n_ctx, n_head_kv, head_dim].
  std::vector<std::vector<float>> keys, vals;
  int64_t blocks_needed = 0;
  for (const SeqSpec& s : c.seqs) {
    const int64_t n_ctx = s.n_past + s.n_q;
    keys.push_back(test::random_floats(rng, n_ctx * kv_row, -1.0f, 1.0f));
    vals.push_back(test::random_floats(rng, n_ctx * kv_row, -1.0f, 1.0f));
    blocks_needed += (n_ctx + c.block_size - 1) / c.block_size;
  }
  const int64_t n_blocks = blocks_needed + 3;
  std::vector<int32_t> phys(n_blocks);
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);

  // What the cache can hold: each row rounded through the cache's type.
  for (auto* store : {&keys, &vals}) {
    for (std::vector<float>& seq : *store) {
      for (size_t r = 0; r < seq.size(); r += static_cast<size_t>(d)) {
        std::vector<unsigned char> q(static_cast<size_t>(kv_row_bytes(c.type, d)));
        kv_quantize_row(c.type, seq.data() + r, q.data(), d);
        kv_dequantize_row(c.type, q.data(), seq.data() + r, d);
      }
    }
  }

  const int64_t row_bytes = kv_row_bytes(c.type, d);
  const int64_t slot_bytes = c.n_head_kv * row_bytes;
  // All bytes 0xff: NaN in f32, f16 and bf16, and a NaN scale in q8_0.
  std::vector<unsigned char> kc(n_blocks * c.block_size * slot_bytes, 0xff);
  std::vector<unsigned char> vc(kc.size(), 0xff);
  const PagedKvView view{.k = kc.data(),
                         .v = vc.data(),
                         .n_blocks = n_blocks,
                         .block_size = c.block_size,
                         .n_head_kv = c.n_head_kv,
                         .head_dim = d,
                         .type = c.type};
  auto cache_at = [&](std::vector<unsigned char>& store, const std::vector<int32_t>& table, int64_t p) {
    return store.data() + (table[p / c.block_size] * c.block_size + p % c.block_size) * slot_bytes;
  };
  // A token's rows [n_head_kv] in the cache's type.
  auto encode = [&](const float* x) {
    std::vector<unsigned char> out(static_cast<size_t>(slot_bytes));
    for (int64_t h = 0; h < c.n_head_kv; ++h) kv_quantize_row(c.type, x + h * d, out.data() + h * row_bytes, d);
    return out;
  };

  std::vector<std::vector<int32_t>> tables(n_seqs);
  std::vector<std::vector<int32_t>> ends(n_seqs);
  std::vector<AttnSeq> seqs(n_seqs);
  int64_t next_block = 0;
  int32_t n_tokens = 0;
  for (int i = 0; i < n_seqs; ++i) {
    const SeqSpec& s = c.seqs[i];
    const int64_t nb = (s.n_past + s.n_q + c.block_size - 1) / c.block_size;
    tables[i].assign(phys.begin() + next_block, phys.begin() + next_block + nb);
    next_block += nb;
    // History the cache already holds, placed by the layout paged_kv.hpp documents.
    for (int64_t p = 0; p < s.n_past; ++p) {
      const auto kb = encode(keys[i].data() + p * kv_row);
      const auto vb = encode(vals[i].data() + p * kv_row);
      std::copy(kb.begin(), kb.end(), cache_at(kc, tables[i], p));
      std::copy(vb.begin(), vb.end(), cache_at(vc, tables[i], p));
    }
    if (!s.open.empty()) ends[i] = key_ends(s);
    seqs[i] = AttnSeq{.q_begin = n_tokens,
                      .n_q = s.n_q,
                      .n_past = s.n_past,
                      .block_table = tables[i].empty() ? nullptr : tables[i].data(),
                      .key_end = ends[i].empty() ? nullptr : ends[i].data()};
    n_tokens += s.n_q;
  }

  // New tokens' K/V rows in batch order, written by kv_write.
  std::vector<float> k_new(n_tokens * kv_row), v_new(n_tokens * kv_row);
  for (int i = 0; i < n_seqs; ++i) {
    const int64_t src = int64_t(c.seqs[i].n_past) * kv_row;
    std::copy_n(keys[i].data() + src, c.seqs[i].n_q * kv_row, k_new.data() + seqs[i].q_begin * kv_row);
    std::copy_n(vals[i].data() + src, c.seqs[i].n_q * kv_row, v_new.data() + seqs[i].q_begin * kv_row);
  }
  kernels::kv_write(view, k_new.data(), v_new.data(), seqs.data(), n_seqs);
  for (int i = 0; i < n_seqs; ++i) {
    for (int64_t p = 0; p < c.seqs[i].n_past + c.seqs[i].n_q; ++p) {
      const auto kb = encode(keys[i].data() + p * kv_row);
      const auto vb = encode(vals[i].data() + p * kv_row);
      for (int64_t e = 0; e < slot_bytes; ++e) {
        ASSERT_EQ(cache_at(kc, tables[i], p)[e], kb[e]) << "k seq " << i << " pos " << p << " byte " << e;
        ASSERT_EQ(cache_at(vc, tables[i], p)[e], vb[e]) << "v seq " << i << " pos " << p << " byte " << e;
      }
    }
  }

  auto q = test::random_floats(rng, n_tokens * c.n_head * d, -c.q_scale, c.q_scale);
  std::vector<float> out(q.size(), 12345.0f);  // every row must be overwritten
  const float scale = 1.0f / std::sqrt(float(d));
  ThreadPool pool(c.threads);
  // Sinks from -2 to 4: some below every score, some above most (rows whose
  // weights then sum to far less than 1).
  const std::vector<float> sinks = c.sinks ? test::random_floats(rng, c.n_head, -2.0f, 4.0f) : std::vector<float>{};
  {
    const test::AmxSwitch amx(c.amx);
    kernels::attention(out.data(), q.data(), view, seqs.data(), n_seqs, c.n_head, scale, pool, c.window, c.softcap,
                       c.sinks ? sinks.data() : nullptr, c.causal);
  }

  const int64_t group = c.n_head / c.n_head_kv;
  for (int i = 0; i < n_seqs; ++i) {
    // What the AMX kernel reads: scale log2(e) q, k and v rounded to bf16.
    // Its softmax weights are rounded too (relative error 2^-9 each) after a
    // 2^x within 2^-18, so its output is within (2^-9 + 2^-17) of the
    // largest |v| of the rounded reference.
    const bool rounded = c.amx && c.seqs[i].n_q >= kernels::cpu::kAmxMinQueries;
    const float q_scale = scale * 1.44269504088896341f;  // the kernel's, in f32
    auto kval = [&](int64_t at) { return rounded ? double(bf16_round(keys[i][at])) : double(keys[i][at]); };
    auto vval = [&](int64_t at) { return rounded ? double(bf16_round(vals[i][at])) : double(vals[i][at]); };
    for (int64_t qi = 0; qi < c.seqs[i].n_q; ++qi) {
      const int64_t pos = c.seqs[i].n_past + qi;
      const int64_t first = c.window > 0 ? std::max<int64_t>(0, pos - c.window + 1) : 0;
      const int64_t end = c.seqs[i].n_past + c.seqs[i].n_q - 1;
      // An encoder's window reaches as far ahead as behind.
      const int64_t own = ends[i].empty() ? pos : ends[i][qi] - 1;
      const int64_t last = c.causal ? own : c.window > 0 ? std::min(end, pos + c.window - 1) : end;
      for (int64_t h = 0; h < c.n_head; ++h) {
        const int64_t kvh = h / group;
        const float* qr = q.data() + ((seqs[i].q_begin + qi) * c.n_head + h) * d;
        std::vector<double> w;
        for (int64_t p = first; p <= last; ++p) {
          double s = 0;
          for (int64_t e = 0; e < d; ++e) {
            const double qe = rounded ? double(bf16_round(qr[e] * q_scale)) : double(qr[e]);
            s += qe * kval(p * kv_row + kvh * d + e);
          }
          s *= rounded ? 1.0 / 1.44269504088896341 : scale;
          w.push_back(c.softcap > 0 ? c.softcap * std::tanh(s / c.softcap) : s);
        }
        const double m = *std::max_element(w.begin(), w.end());
        double z = c.sinks ? std::exp(double(sinks[h]) - m) : 0.0;  // the sink's share of the denominator
        for (double& x : w) z += x = std::exp(x - m);
        const float* o = out.data() + ((seqs[i].q_begin + qi) * c.n_head + h) * d;
        for (int64_t e = 0; e < d; ++e) {
          double want = 0, vmax = 0;
          for (int64_t p = first; p <= last; ++p) {
            want += w[p - first] / z * vval(p * kv_row + kvh * d + e);
            vmax = std::max(vmax, std::abs(vval(p * kv_row + kvh * d + e)));
          }
          const double tol = rounded ? (std::ldexp(1.0, -9) + std::ldexp(1.0, -17)) * vmax + kTol : kTol;
          ASSERT_NEAR(o[e], want, tol) << "seq " << i << " query " << qi << " head " << h << " dim " << e;
        }
      }
    }
  }
}

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

// Gemma 3's images: the queries of an open block see every key of the
// block, later ones included, and the rest of the sequence causally (with
// a sliding window too: it bounds the keys behind), on the lane kernel
// (prefill items) and the tile kernels, f32 and quantized caches. One
// sequence continues a history that ends inside a block.
TEST(Attention, OpenBlocksSeeTheirWholeBlock) {
  uint32_t seed = 900;
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (KvType type : {KvType::f32, KvType::f16, KvType::q8_0}) {
      for (int32_t window : {0, 6}) {
        const Case c{.type = type,
                     .n_head = 4,
                     .n_head_kv = 2,
                     .head_dim = 32,
                     .block_size = 16,
                     .window = window,
                     .threads = seed % 2 == 0 ? 1 : 3,
                     .q_scale = 2.0f,
                     .seqs = {{0, 45, {3, 19, 25, 41}}, {0, 1}, {20, 30, {17, 33}}, {7, 9, {7, 16}}, {40, 1}}};
        run_case(c, isa, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The AMX-BF16 prefill over 16- and 8-bit caches: sequences whose every item
// holds 8 rows or more (one thread: items of 128 (query, head) rows, then
// the tail), chunked after a history, with a window, open blocks and sinks,
// head sizes that do and do not fill 32 lanes, beside decodes (the f32
// kernels).
TEST(Attention, AmxPrefillMatchesTheRoundedReference) {
  if (!kernels::cpu::amx_attention_available()) {
    std::printf("[ SKIPPED  ] the AMX-BF16 attention: this CPU has no AMX (or it is turned off)\n");
    return;
  }
  uint32_t seed = 1200;
  for (KvType type : {KvType::f16, KvType::bf16, KvType::q8_0}) {  // an f32 cache keeps f32 attention
    for (int64_t head_dim : {64, 72, 128, 256}) {
      if (type == KvType::q8_0 && head_dim % 32 != 0) continue;
      for (int32_t window : {0, 20}) {
        const Case c{.type = type,
                     .n_head = 8,
                     .n_head_kv = 2,
                     .head_dim = head_dim,
                     .block_size = 16,
                     .window = window,
                     .threads = 1,
                     .q_scale = 3.0f,
                     .seqs = {{0, 48}, {30, 44, {30, 50}}, {5, 1}, {0, 42, {3, 19}}, {100, 1}},
                     .sinks = seed % 3 == 0,
                     .amx = true};
        run_case(c, Isa::avx512, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Key ends before a query's own position, past the step or falling are refused.
TEST(Attention, RefusesKeyEndsOutsideTheStep) {
  std::vector<float> kc(4 * 16 * 8), vc(kc.size()), q(8 * 8), out(q.size());
  const PagedKvView view{
      .k = kc.data(), .v = vc.data(), .n_blocks = 4, .block_size = 16, .n_head_kv = 1, .head_dim = 8};
  const std::vector<int32_t> table = {0};
  ThreadPool pool(1);
  for (const std::vector<int32_t>& ends : std::vector<std::vector<int32_t>>{
           {1, 2, 3, 4, 5, 6, 7, 9}, {1, 2, 2, 4, 5, 6, 7, 8}, {4, 4, 3, 4, 8, 8, 8, 8}}) {
    const AttnSeq seq{.q_begin = 0, .n_q = 8, .n_past = 0, .block_table = table.data(), .key_end = ends.data()};
    EXPECT_THROW(kernels::attention(out.data(), q.data(), view, &seq, 1, 1, 1.0f, pool), Error);
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
// four of 8 rows. One thread keeps each item whole. Tiles of 32 positions
// cross pages of 4 and 16, and windows cut rows inside a tile.
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
