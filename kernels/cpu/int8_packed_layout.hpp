// The repacked layouts of kernels/cpu/int8_packed.hpp, one struct per weight
// type: how a unit (a block of 32, or a k-quant super-block of 256) of a
// 16-row group is written from the GGUF rows, and read back as lines of u and
// the per-row scale and min of each sub-block, from the lines and their
// policies of int8_packed_lines.hpp. The values read back are the ones the
// int8 readers (int8_readers.hpp) give, bit for bit. Include only from files
// built with at least -mavx2 -mf16c, after the policy's header (internal
// linkage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/error.hpp"
#include "kernels/cpu/int8_packed_lines.hpp"
#include "kernels/cpu/int8_readers.hpp"
#include "kernels/cpu/weight_prefetch.hpp"

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

// ---- The 32-input block types: q4_0, q4_1, q5_0, q5_1, q8_0, iq4_nl, mxfp4 ----
// A group is one stream of unit pairs: the lines of both units, then their
// fp16 d (and m) values, 2 x 32 (or 64) bytes. A pair is whole cache lines
// (one unit's lines and scales would be 288 or 544 bytes, and every other
// unit's loads would straddle lines), and the group keeps the GGUF size. An
// odd last unit is a pair of one. One stream, not the lines of all units
// followed by all their scales: 1B q4_0 decode, at the memory rate, read
// each group as two streams and lost 10-20% to them (the scales' stream
// moving 8x slower than its lines').
// kTable (iq4_nl, mxfp4): the nibbles are indices into the reader's levels
// (Rd::u_table); they are stored as such and mapped to u as they are read.
// The per-row scales are fp16 d, or for mxfp4 2^(e - 128) as bf16 (exact:
// bf16 keeps f32's exponent range), so every scale fits 32 bytes a unit.
template <class Rd, class Block, int kBits, bool kTable = false>
struct PkSimple {
  using Reader = Rd;
  static constexpr bool kNibbles = kBits == 4 && !kTable;
  static constexpr int64_t kUnitK = 32;
  static constexpr int kSubs = 1;
  static constexpr int64_t kLineBytes = sub_bytes<kBits>();
  static constexpr int64_t kScaleBytes = Rd::kMin ? 64 : 32;
  static constexpr int64_t kUnitBytes = kLineBytes + kScaleBytes;

  static constexpr int64_t kPairBytes = 2 * kUnitBytes;
  static constexpr int64_t kChunk = sizeof(Block);
  static_assert(kLineBytes % 64 == 0 && kPairBytes % 64 == 0);
  static_assert(!kTable || kBits == 4);
  static constexpr bool kBf16Scale = std::is_same_v<Block, BlockMXFP4>;

  static const uint8_t* unit_lines(const uint8_t* g, int64_t, int64_t un) {
    return g + (un >> 1) * kPairBytes + (un & 1) * kLineBytes;
  }
  static uint8_t* unit_lines(uint8_t* g, int64_t n_units, int64_t un) {
    return const_cast<uint8_t*>(unit_lines(static_cast<const uint8_t*>(g), n_units, un));
  }
  // After both units' lines, or after the one unit's of an odd last pair.
  static const uint8_t* unit_scales(const uint8_t* g, int64_t n_units, int64_t un) {
    const int64_t pair = un >> 1;
    const int64_t lines_in_pair = 2 * pair + 1 < n_units ? 2 : 1;
    return g + pair * kPairBytes + lines_in_pair * kLineBytes + (un & 1) * kScaleBytes;
  }

  static void pack_unit(const uint8_t* const (&rows)[kGroupRows], int nr, int64_t un, uint8_t* group,
                        int64_t n_units) {
    float sc[kGroupRows][kReaderScales];
    uint8_t u[kGroupRows][32];
    if constexpr (kTable) {
      nibble_rows(rows, nr, un, [](const uint8_t* row, int64_t c) { return row + c * kChunk + offsetof(Block, qs); },
                  u);
    } else {
      chunk_rows<Rd>(rows, nr, un, sc, u);
    }
    Line lines[8];
    transpose_to_lines(u, lines);
    store_sub<kBits>(lines, unit_lines(group, n_units, un));
    uint16_t d[kGroupRows] = {}, m[kGroupRows] = {};
    for (int r = 0; r < nr; ++r) {
      const auto* b = reinterpret_cast<const Block*>(rows[r] + un * static_cast<int64_t>(sizeof(Block)));
      if constexpr (kBf16Scale) {
        d[r] = static_cast<uint16_t>(mxfp4_scale_bits(b->e) >> 16);
      } else {
        d[r] = b->d;
      }
      if constexpr (Rd::kMin) m[r] = b->m;
    }
    auto* p = const_cast<uint8_t*>(unit_scales(group, n_units, un));
    std::memcpy(p, d, sizeof d);
    if constexpr (Rd::kMin) std::memcpy(p + 32, m, sizeof m);
  }
  template <class V>
  [[gnu::always_inline]] static void lines(const uint8_t* g, int64_t n_units, int64_t un, int,
                                           typename V::Vec (&out)[8]) {
    if constexpr (kTable) {
      read_table_lines<V>(unit_lines(g, n_units, un), Rd::u_table(), out);
    } else {
      read_sub<V, kBits>(unit_lines(g, n_units, un), out);
    }
  }
  // The 4 lines of a nibble unit as stored (low nibbles: inputs 4 g..4 g + 3,
  // high: 4 (g + 4)..).
  template <class V>
  [[gnu::always_inline]] static void nibble_lines(const uint8_t* g, int64_t n_units, int64_t un, int,
                                                  typename V::Vec (&out)[4]) {
    for (int l = 0; l < 4; ++l) out[l] = V::load(unit_lines(g, n_units, un) + 64 * l);
  }
  template <class V>
  [[gnu::always_inline]] static void scales(const uint8_t* g, int64_t n_units, int64_t un, int,
                                            typename V::Ps& scale, typename V::Ps& min) {
    const uint8_t* p = unit_scales(g, n_units, un);
    if constexpr (kBf16Scale) {
      scale = V::bf16s(p);
    } else {
      scale = V::halves(p);
    }
    min = Rd::kMin ? V::halves(p + 32) : V::zero_ps();
  }
  // Every line of the unit, `ahead` bytes on in the group's stream (from
  // its lines on: a pair's two units cover its scales).
  static constexpr bool kPrefetchBySub = false;
  [[gnu::always_inline]] static void prefetch_at(const uint8_t* g, int64_t n_units, int64_t un, uintptr_t ahead) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(unit_lines(g, n_units, un)) + ahead;
    for (uintptr_t i = 0; i < static_cast<uintptr_t>(kUnitBytes); i += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
    }
  }
  // 24 KiB ahead where one group is read at a time (the prefill
  // expansions). 1B q4_0 GEMV over DRAM, against one line a unit 12 KiB
  // ahead: +12-20%.
  [[gnu::always_inline]] static void prefetch(const uint8_t* g, int64_t n_units, int64_t un) {
    prefetch_at(g, n_units, un, 2 * kPrefetchBytes);
  }
};

using PkQ4_0 = PkSimple<RdQ4_0, BlockQ4_0, 4>;
using PkQ4_1 = PkSimple<RdQ4_1, BlockQ4_1, 4>;
using PkQ5_0 = PkSimple<RdQ5_0, BlockQ5_0, 5>;
using PkQ5_1 = PkSimple<RdQ5_1, BlockQ5_1, 5>;
using PkQ8_0 = PkSimple<RdQ8_0, BlockQ8_0, 8>;
using PkIQ4_NL = PkSimple<RdIQ4_NL, BlockIQ4_NL, 4, true>;
using PkMXFP4 = PkSimple<RdMXFP4, BlockMXFP4, 4, true>;

// The prefetches of a k-quant layout P (its units P::kUnitBytes apart, each
// read in P::kSubs sub-blocks), which derives from this.
template <class P>
struct KquantPrefetch {
  // The prefill expansion's: every line of the unit, 12 KiB ahead.
  [[gnu::always_inline]] static void prefetch(const uint8_t* g, int64_t, int64_t un) {
    const uint8_t* unit = g + un * P::kUnitBytes;
    for (int64_t i = 0; i < P::kUnitBytes; i += 64) prefetch_ahead(unit + i);
  }
  // The GEMV's: sub-block j's share of the unit's lines, `ahead` bytes on,
  // so that a unit's prefetch is spread over its sub-blocks.
  static constexpr bool kPrefetchBySub = true;
  [[gnu::always_inline]] static void prefetch_sub(const uint8_t* g, int64_t un, int j, uintptr_t ahead) {
    constexpr int64_t kLines = P::kUnitBytes / 64;
    const uintptr_t base = reinterpret_cast<uintptr_t>(g + un * P::kUnitBytes) + ahead;
    for (int64_t l = kLines * j / P::kSubs; l < kLines * (j + 1) / P::kSubs; ++l) {
      _mm_prefetch(reinterpret_cast<const char*>(base + 64 * static_cast<uintptr_t>(l)), _MM_HINT_T0);
    }
  }
};

// ---- q4_K and q5_K: a header of d, dmin, scales and mins per super-block ----
template <class Rd, class Block, int kBits>
struct PkQ45K : KquantPrefetch<PkQ45K<Rd, Block, kBits>> {
  using Reader = Rd;
  static constexpr bool kNibbles = kBits == 4;
  static constexpr int64_t kUnitK = 256;
  static constexpr int kSubs = 8;
  static constexpr int64_t kHeader = 32 + 32 + 128 + 128;  // d, dmin, sc[8][16], m[8][16]
  static constexpr int64_t kSubBytes = sub_bytes<kBits>();
  static constexpr int64_t kUnitBytes = kHeader + 8 * kSubBytes;

  static void pack_unit(const uint8_t* const (&rows)[kGroupRows], int nr, int64_t unit, uint8_t* group, int64_t) {
    uint8_t* dst = group + unit * kUnitBytes;
    std::memset(dst, 0, kHeader);
    for (int r = 0; r < nr; ++r) {
      const auto* b = reinterpret_cast<const Block*>(rows[r] + unit * static_cast<int64_t>(sizeof(Block)));
      std::memcpy(dst + 2 * r, &b->d, 2);
      std::memcpy(dst + 32 + 2 * r, &b->dmin, 2);
      for (int j = 0; j < 8; ++j) {
        kquant_scale_min(b->scales, j, dst[64 + 16 * j + r], dst[192 + 16 * j + r]);
      }
    }
    float sc[kGroupRows][kReaderScales];
    uint8_t u[kGroupRows][32];
    uint8_t* p = dst + kHeader;
    for (int j = 0; j < 8; ++j) {
      chunk_rows<Rd>(rows, nr, unit * 8 + j, sc, u);
      Line lines[8];
      transpose_to_lines(u, lines);
      p = store_sub<kBits>(lines, p);
    }
  }
  template <class V>
  [[gnu::always_inline]] static void lines(const uint8_t* g, int64_t, int64_t un, int j, typename V::Vec (&out)[8]) {
    read_sub<V, kBits>(g + un * kUnitBytes + kHeader + j * kSubBytes, out);
  }
  template <class V>
  [[gnu::always_inline]] static void nibble_lines(const uint8_t* g, int64_t, int64_t un, int j,
                                                  typename V::Vec (&out)[4]) {
    for (int l = 0; l < 4; ++l) out[l] = V::load(g + un * kUnitBytes + kHeader + j * kSubBytes + 64 * l);
  }
  // As prepare_q45k: d * scale_j and -dmin * min_j, in f32.
  template <class V>
  [[gnu::always_inline]] static void scales(const uint8_t* g, int64_t, int64_t un, int j, typename V::Ps& scale,
                                            typename V::Ps& min) {
    const uint8_t* unit = g + un * kUnitBytes;
    scale = V::mul(V::halves(unit), V::u8(unit + 64 + 16 * j));
    min = V::mul(V::neg(V::halves(unit + 32)), V::u8(unit + 192 + 16 * j));  // (-dmin) * m
  }
};

using PkQ4_K = PkQ45K<RdQ4_K, BlockQ4_K, 4>;
using PkQ5_K = PkQ45K<RdQ5_K, BlockQ5_K, 5>;

// The scales of sub-block j of a unit whose header is the 16 rows' fp16 d,
// then their int8 sub-block scales [16][16] (q6_K, q3_K): d * scale.
template <class V>
[[gnu::always_inline]] inline void d_i8_scales(const uint8_t* unit, int j, typename V::Ps& scale,
                                               typename V::Ps& min) {
  scale = V::mul(V::halves(unit), V::i8(unit + 32 + 16 * j));
  min = V::zero_ps();
}

// ---- q6_K: d and 16 int8 scales per super-block, sub-blocks of 16 ----
struct PkQ6_K : KquantPrefetch<PkQ6_K> {
  using Reader = RdQ6_K;
  static constexpr bool kNibbles = false;
  static constexpr int64_t kUnitK = 256;
  static constexpr int kSubs = 16;
  static constexpr int64_t kHeader = 32 + 256 + 32;  // d, sc[16][16], padding to whole lines
  static constexpr int64_t kSubBytes = SplitLines<2>::kBytes;  // 4 lines of 6 bits in 3
  static constexpr int64_t kUnitBytes = kHeader + 16 * kSubBytes;

  static void pack_unit(const uint8_t* const (&rows)[kGroupRows], int nr, int64_t unit, uint8_t* group, int64_t) {
    uint8_t* dst = group + unit * kUnitBytes;
    std::memset(dst, 0, kHeader);
    for (int r = 0; r < nr; ++r) {
      const auto* b = reinterpret_cast<const BlockQ6_K*>(rows[r] + unit * static_cast<int64_t>(sizeof(BlockQ6_K)));
      std::memcpy(dst + 2 * r, &b->d, 2);
      for (int i = 0; i < 16; ++i) dst[32 + 16 * i + r] = static_cast<uint8_t>(b->scales[i]);
    }
    float sc[kGroupRows][kReaderScales];
    uint8_t u[kGroupRows][32];
    uint8_t* p = dst + kHeader;
    for (int c = 0; c < 8; ++c) {  // a chunk of 32 is two sub-blocks: lines 0..3 and 4..7
      chunk_rows<RdQ6_K>(rows, nr, unit * 8 + c, sc, u);
      Line lines[8];
      transpose_to_lines(u, lines);
      p = SplitLines<2>::store(lines, p);
      p = SplitLines<2>::store(lines + 4, p);
    }
  }
  template <class V>
  [[gnu::always_inline]] static void lines(const uint8_t* g, int64_t, int64_t un, int j, typename V::Vec (&out)[8]) {
    SplitLines<2>::template read<V>(g + un * kUnitBytes + kHeader + j * kSubBytes, out);
  }
  // As RdQ6_K::prepare: d * scale_j in f32.
  template <class V>
  [[gnu::always_inline]] static void scales(const uint8_t* g, int64_t, int64_t un, int j, typename V::Ps& scale,
                                            typename V::Ps& min) {
    d_i8_scales<V>(g + un * kUnitBytes, j, scale, min);
  }
};

// ---- q2_K and q3_K: sub-blocks of 16 at 2 (+1) bits a weight ----

// q2_K: d and dmin (fp16) of the 16 rows, then the 16 sub-blocks' scale
// bytes (scale low nibble, min high, as stored) [16][16], then 16 lines of
// 2-bit u. The GGUF size exactly (21 lines for 16 rows × 84 bytes).
struct PkQ2_K : KquantPrefetch<PkQ2_K> {
  using Reader = RdQ2_K;
  static constexpr bool kNibbles = false;
  static constexpr int64_t kUnitK = 256;
  static constexpr int kSubs = 16;
  static constexpr int64_t kHeader = 32 + 32 + 256;  // d, dmin, sc[16][16]
  static constexpr int64_t kUnitBytes = kHeader + 16 * 64;

  static void pack_unit(const uint8_t* const (&rows)[kGroupRows], int nr, int64_t unit, uint8_t* group, int64_t) {
    uint8_t* dst = group + unit * kUnitBytes;
    std::memset(dst, 0, kHeader);
    for (int r = 0; r < nr; ++r) {
      const auto* b = reinterpret_cast<const BlockQ2_K*>(rows[r] + unit * static_cast<int64_t>(sizeof(BlockQ2_K)));
      std::memcpy(dst + 2 * r, &b->d, 2);
      std::memcpy(dst + 32 + 2 * r, &b->dmin, 2);
      for (int i = 0; i < 16; ++i) dst[64 + 16 * i + r] = b->scales[i];
    }
    float sc[kGroupRows][kReaderScales];
    uint8_t u[kGroupRows][32];
    for (int c = 0; c < 8; ++c) {  // a chunk of 32 is two sub-blocks: lines 0..3 and 4..7
      chunk_rows<RdQ2_K>(rows, nr, unit * 8 + c, sc, u);
      Line lines[8];
      transpose_to_lines(u, lines);
      store_crumbs(lines, dst + kHeader + 64 * (2 * c));
      store_crumbs(lines + 4, dst + kHeader + 64 * (2 * c + 1));
    }
  }
  template <class V>
  [[gnu::always_inline]] static void lines(const uint8_t* g, int64_t, int64_t un, int j, typename V::Vec (&out)[8]) {
    read_crumbs<V>(g + un * kUnitBytes + kHeader + 64 * j, out);
  }
  // As RdQ2_K::prepare: d * scale_j and -dmin * min_j, in f32.
  template <class V>
  [[gnu::always_inline]] static void scales(const uint8_t* g, int64_t, int64_t un, int j, typename V::Ps& scale,
                                            typename V::Ps& min) {
    const uint8_t* unit = g + un * kUnitBytes;
    typename V::Ps s, m;
    V::u8_nibbles(unit + 64 + 16 * j, s, m);
    scale = V::mul(V::halves(unit), s);
    min = V::mul(V::neg(V::halves(unit + 32)), m);  // (-dmin) * m
  }
};

// q3_K: d (fp16) and the 16 scales less 32 (i8) of the 16 rows, as q6_K's
// header; then per pair of sub-blocks, a line of 2-bit u for each and a line
// of their third bits (bit l for line l of the first, 4 + l of the second).
// 29 lines for 16 rows × 110 bytes: +5.5% against the file.
struct PkQ3_K : KquantPrefetch<PkQ3_K> {
  using Reader = RdQ3_K;
  static constexpr bool kNibbles = false;
  static constexpr int64_t kUnitK = 256;
  static constexpr int kSubs = 16;
  static constexpr int64_t kHeader = 32 + 256 + 32;  // d, sc[16][16], padding to whole lines
  static constexpr int64_t kPairBytes = 3 * 64;
  static constexpr int64_t kUnitBytes = kHeader + 8 * kPairBytes;

  static void pack_unit(const uint8_t* const (&rows)[kGroupRows], int nr, int64_t unit, uint8_t* group, int64_t) {
    uint8_t* dst = group + unit * kUnitBytes;
    std::memset(dst, 0, kHeader);
    for (int r = 0; r < nr; ++r) {
      const auto* b = reinterpret_cast<const BlockQ3_K*>(rows[r] + unit * static_cast<int64_t>(sizeof(BlockQ3_K)));
      std::memcpy(dst + 2 * r, &b->d, 2);
      for (int i = 0; i < 16; ++i) dst[32 + 16 * i + r] = static_cast<uint8_t>(q3_K_scale(b->scales, i) - 32);
    }
    float sc[kGroupRows][kReaderScales];
    uint8_t u[kGroupRows][32];
    for (int c = 0; c < 8; ++c) {
      chunk_rows<RdQ3_K>(rows, nr, unit * 8 + c, sc, u);
      Line lines[8], low[8];
      transpose_to_lines(u, lines);
      uint8_t* pair = dst + kHeader + c * kPairBytes;
      for (int k = 0; k < 64; ++k) {
        int high = 0;
        for (int l = 0; l < 8; ++l) {
          low[l].b[k] = lines[l].b[k] & 3;
          high |= ((lines[l].b[k] >> 2) & 1) << l;
        }
        pair[128 + k] = static_cast<uint8_t>(high);
      }
      store_crumbs(low, pair);
      store_crumbs(low + 4, pair + 64);
    }
  }
  template <class V>
  [[gnu::always_inline]] static void lines(const uint8_t* g, int64_t, int64_t un, int j, typename V::Vec (&out)[8]) {
    const uint8_t* pair = g + un * kUnitBytes + kHeader + (j / 2) * kPairBytes;
    read_crumbs<V>(pair + 64 * (j & 1), out);
    const auto high = V::load(pair + 128);
#pragma GCC unroll 4
    for (int l = 0; l < 4; ++l) {  // bit 4 (j & 1) + l to bit 2
      const int s = 4 * (j & 1) + l - 2;
      const auto h = s >= 0 ? V::srl(high, static_cast<unsigned>(s)) : V::sll(high, static_cast<unsigned>(-s));
      out[l] = V::or_(out[l], V::and_(h, V::bytes(4)));
    }
  }
  // As RdQ3_K::prepare: d * (scale_j - 32) in f32.
  template <class V>
  [[gnu::always_inline]] static void scales(const uint8_t* g, int64_t, int64_t un, int j, typename V::Ps& scale,
                                            typename V::Ps& min) {
    d_i8_scales<V>(g + un * kUnitBytes, j, scale, min);
  }
};

// ---- iq4_xs: d and 8 int8 scales per super-block, nibble indices ----

// d (fp16) and the 8 scales less 32 (i8) of the 16 rows, in q6_K's header
// places, then 8 sub-blocks of 4 nibble lines of level indices, mapped to u
// as they are read. 35 lines for 16 rows × 136 bytes: +2.9%.
struct PkIQ4_XS : KquantPrefetch<PkIQ4_XS> {
  using Reader = RdIQ4_XS;
  static constexpr bool kNibbles = false;
  static constexpr int64_t kUnitK = 256;
  static constexpr int kSubs = 8;
  static constexpr int64_t kHeader = 32 + 128 + 32;  // d, sc[8][16], padding to whole lines
  static constexpr int64_t kUnitBytes = kHeader + 8 * 4 * 64;

  static void pack_unit(const uint8_t* const (&rows)[kGroupRows], int nr, int64_t unit, uint8_t* group, int64_t) {
    uint8_t* dst = group + unit * kUnitBytes;
    std::memset(dst, 0, kHeader);
    for (int r = 0; r < nr; ++r) {
      const auto* b = reinterpret_cast<const BlockIQ4_XS*>(rows[r] + unit * static_cast<int64_t>(sizeof(BlockIQ4_XS)));
      std::memcpy(dst + 2 * r, &b->d, 2);
      for (int j = 0; j < 8; ++j) dst[32 + 16 * j + r] = static_cast<uint8_t>(iq4_xs_scale(*b, j) - 32);
    }
    uint8_t u[kGroupRows][32];
    for (int j = 0; j < 8; ++j) {
      nibble_rows(rows, nr, unit * 8 + j, [](const uint8_t* row, int64_t c) {
        return row + (c / 8) * static_cast<int64_t>(sizeof(BlockIQ4_XS)) + offsetof(BlockIQ4_XS, qs) + 16 * (c % 8);
      }, u);
      Line lines[8];
      transpose_to_lines(u, lines);
      store_lines<true>(lines, dst + kHeader + 256 * j);
    }
  }
  template <class V>
  [[gnu::always_inline]] static void lines(const uint8_t* g, int64_t, int64_t un, int j, typename V::Vec (&out)[8]) {
    read_table_lines<V>(g + un * kUnitBytes + kHeader + 256 * j, iq4_u_table(), out);
  }
  // As RdIQ4_XS::prepare: d * (scale_j - 32) in f32.
  template <class V>
  [[gnu::always_inline]] static void scales(const uint8_t* g, int64_t, int64_t un, int j, typename V::Ps& scale,
                                            typename V::Ps& min) {
    d_i8_scales<V>(g + un * kUnitBytes, j, scale, min);
  }
};

// Whole cache lines, so that every group starts 64-byte aligned.
template <class P>
int64_t group_bytes(int64_t n_in) {
  return (n_in / P::kUnitK * P::kUnitBytes + 63) / 64 * 64;
}

// Calls f.template operator()<P>() for the layout of t.
template <class F>
void with_layout(DType t, F&& f) {
  switch (t) {
    case DType::q4_0: return f.template operator()<PkQ4_0>();
    case DType::q4_1: return f.template operator()<PkQ4_1>();
    case DType::q5_0: return f.template operator()<PkQ5_0>();
    case DType::q5_1: return f.template operator()<PkQ5_1>();
    case DType::q8_0: return f.template operator()<PkQ8_0>();
    case DType::q2_K: return f.template operator()<PkQ2_K>();
    case DType::q3_K: return f.template operator()<PkQ3_K>();
    case DType::q4_K: return f.template operator()<PkQ4_K>();
    case DType::q5_K: return f.template operator()<PkQ5_K>();
    case DType::q6_K: return f.template operator()<PkQ6_K>();
    case DType::iq4_nl: return f.template operator()<PkIQ4_NL>();
    case DType::iq4_xs: return f.template operator()<PkIQ4_XS>();
    case DType::mxfp4: return f.template operator()<PkMXFP4>();
    case DType::f32:
    case DType::f16:
    case DType::bf16: break;
  }
  throw Error(Errc::unsupported, "int8 repacking: no layout for " + std::string(dtype_name(t)));
}

}  // namespace
}  // namespace troupe::kernels::cpu
