// The CPU attention tests' reference (attention_test.cpp,
// attention_open_blocks_test.cpp): a batch of sequences written into a paged
// cache through kv_write, attention over it, and each output row against a
// double-precision softmax(q k^T * scale) v over unpaged copies of K and V
// (the header of attention_test.cpp says what is checked and how closely).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "isa_paths.hpp"
#include "kernels/cpu/attention_lanes.hpp"
#include "kernels/cpu_kernels.hpp"
#include "memory/kv_type.hpp"

namespace troupe::test {

constexpr double kTol = 1e-5;
inline const float kNan = std::numeric_limits<float>::quiet_NaN();

struct SeqSpec {
  int32_t n_past;
  int32_t n_q;
  // (begin, end) positions of blocks whose queries see the whole block
  // (AttnSeq::key_end: Gemma 3's images); each ends among the new tokens.
  std::vector<int32_t> open = {};
};

// AttnSeq::key_end of a sequence with open blocks: each query's own end, or
// its block's.
inline std::vector<int32_t> key_ends(const SeqSpec& s) {
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
  // cpu::kWideMinQueries or more: checked against a reference over the
  // values it rounds to bf16. Off: the f32 kernels, AMX turned off.
  bool amx = false;
};

// Round to nearest even, as vcvtneps2bf16.
inline float bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

inline std::string describe(const Case& c, Isa isa) {
  return std::string(isa_name(isa)) + " kv=" + kv_type_name(c.type) + " n_head=" + std::to_string(c.n_head) +
         " n_head_kv=" + std::to_string(c.n_head_kv) + " head_dim=" + std::to_string(c.head_dim) +
         " block_size=" + std::to_string(c.block_size) + " window=" + std::to_string(c.window) +
         " threads=" + std::to_string(c.threads) + " softcap=" + std::to_string(c.softcap) +
         " sinks=" + (c.sinks ? "yes" : "no") + " causal=" + (c.causal ? "yes" : "no");
}

inline void run_case(const Case& c, Isa isa, uint32_t seed) {
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
    const bool rounded = c.amx && c.seqs[i].n_q >= kernels::cpu::kWideMinQueries;
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

}  // namespace troupe::test
