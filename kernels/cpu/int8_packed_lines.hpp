// The pieces the int8 packed layouts (int8_packed_layout.hpp) are built
// from: a 16-row group's lines of 4 inputs of every row, written from the
// readers' unpacked rows by plain byte code (it runs once, at load, on any
// CPU with AVX2) and read back over a line policy V, Lines512 (a whole line
// a register, packed_lines_avx512.hpp) or Lines256<H> (half H of it, rows
// 8 H .. 8 H + 7, packed_lines_avx2.hpp). Each read is V's operations on
// bytes that never interact across rows, so both policies read the same
// values. Lines are stored as bytes, nibbles, nibbles plus a line of top
// bits (5 and 6 bits), or 2-bit crumbs. Include only from files built with
// at least -mavx2 -mf16c (internal linkage).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/int8_readers.hpp"
#include "kernels/cpu/matmul_int8.hpp"

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

constexpr int kGroupRows = static_cast<int>(detail::kPanelRows);  // 16

// A line as it is written: byte 4 r + i is input i (of 4) of row r.
struct alignas(64) Line {
  uint8_t b[64];
};

// 16 rows × 32 inputs of u (row-major, 32 bytes a row) as 8 lines: line g
// holds inputs 4 g .. 4 g + 3 of every row.
inline void transpose_to_lines(const uint8_t (&u)[kGroupRows][32], Line (&lines)[8]) {
  for (int g = 0; g < 8; ++g) {
    for (int r = 0; r < kGroupRows; ++r) std::memcpy(lines[g].b + 4 * r, &u[r][4 * g], 4);
  }
}

// Writes the 8 lines as bytes, or (nibbles) as 4 lines: g and g + 4 together.
template <bool kNibbles>
uint8_t* store_lines(const Line (&lines)[8], uint8_t* dst) {
  if constexpr (kNibbles) {
    for (int g = 0; g < 4; ++g) {
      for (int k = 0; k < 64; ++k) dst[64 * g + k] = static_cast<uint8_t>(lines[g].b[k] | (lines[g + 4].b[k] << 4));
    }
    return dst + 4 * 64;
  } else {
    std::memcpy(dst, lines, 8 * 64);
    return dst + 8 * 64;
  }
}

// Reads the lines of one 32-input sub-block back as 8 byte lines.
template <class V, bool kNibbles>
[[gnu::always_inline]] inline void read_lines(const uint8_t* src, typename V::Vec (&lines)[8]) {
  if constexpr (kNibbles) {
    const auto low = V::bytes(0x0f);
    for (int g = 0; g < 4; ++g) {
      const auto v = V::load(src + 64 * g);
      lines[g] = V::and_(v, low);
      lines[g + 4] = V::and_(V::srl(v, 4), low);
    }
  } else {
    for (int g = 0; g < 8; ++g) lines[g] = V::load(src + 64 * g);
  }
}

// Lines of u of 5 or 6 bits (q5_0, q5_1, q5_K; q6_K) kept at the file's
// bits a weight: the low nibbles of kLines lines in kLines / 2 nibble lines
// (line l low, line l + kLines / 2 high), then one line of their top kHigh
// bits (bits kHigh l .. kHigh l + kHigh - 1 of a byte, for line l). A byte a
// weight read 31% (q6_K) to 57% (q5) more than the file, and decode over DRAM
// reads what it is given.
template <int kHigh>
struct SplitLines {
  static constexpr int kLines = 8 / kHigh;  // 8 (5 bits), 4 (6 bits)
  static constexpr int kHalf = kLines / 2;
  static constexpr int64_t kBytes = (kHalf + 1) * 64;

  static uint8_t* store(const Line* lines, uint8_t* dst) {
    constexpr int kTop = (1 << kHigh) - 1;
    for (int k = 0; k < 64; ++k) {
      int high = 0;
      for (int l = 0; l < kLines; ++l) high |= ((lines[l].b[k] >> 4) & kTop) << (kHigh * l);
      for (int l = 0; l < kHalf; ++l) {
        dst[64 * l + k] = static_cast<uint8_t>((lines[l].b[k] & 0x0f) | ((lines[l + kHalf].b[k] & 0x0f) << 4));
      }
      dst[64 * kHalf + k] = static_cast<uint8_t>(high);
    }
    return dst + kBytes;
  }
  // Line l: its nibble (bits 0-3, from a nibble line) under its top bits
  // moved to bit 4 on; one AND, one shift or two and one select a line.
  template <class V>
  [[gnu::always_inline]] static void read(const uint8_t* src, typename V::Vec* out) {
    const auto low = V::bytes(0x0f);
    const auto top = V::bytes(static_cast<uint8_t>(((1 << kHigh) - 1) << 4));
    const auto high = V::load(src + 64 * kHalf);
#pragma GCC unroll 8
    for (int l = 0; l < kLines; ++l) {
      const auto v = V::load(src + 64 * (l % kHalf));
      const auto nibble = l < kHalf ? v : V::srl(v, 4);
      const int s = 4 - kHigh * l;
      const auto h = s > 0 ? V::sll(high, static_cast<unsigned>(s))
                     : s < 0 ? V::srl(high, static_cast<unsigned>(-s))
                             : high;
      out[l] = V::select(low, nibble, V::and_(h, top));
    }
  }
};

// The 8 lines of a 32-input sub-block stored at kBits a weight (4: nibbles,
// 5: split, 8: bytes), and read back as 8 byte lines.
template <int kBits>
constexpr int64_t sub_bytes() {
  return kBits == 4 ? 4 * 64 : kBits == 5 ? SplitLines<1>::kBytes : 8 * 64;
}
template <int kBits>
uint8_t* store_sub(const Line (&lines)[8], uint8_t* dst) {
  if constexpr (kBits == 5) {
    return SplitLines<1>::store(lines, dst);
  } else {
    return store_lines<kBits == 4>(lines, dst);
  }
}
template <class V, int kBits>
[[gnu::always_inline]] inline void read_sub(const uint8_t* src, typename V::Vec (&lines)[8]) {
  if constexpr (kBits == 5) {
    SplitLines<1>::template read<V>(src, lines);
  } else {
    read_lines<V, kBits == 4>(src, lines);
  }
}

// u of chunk c of each row (rows past nr are zero).
template <class Rd>
void chunk_rows(const uint8_t* const (&rows)[kGroupRows], int nr, int64_t c, float (&sc)[kGroupRows][kReaderScales],
                uint8_t (&u)[kGroupRows][32]) {
  for (int r = 0; r < kGroupRows; ++r) {
    if (r >= nr) {
      std::memset(u[r], 0, 32);
      continue;
    }
    prepare_at<Rd>(rows[r], c, sc[r]);
    __m256i v;
    __m256 s, m;
    Rd::chunk(rows[r], c, sc[r], v, s, m);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(u[r]), v);
  }
}

// The nibble indices (q4_0 layout: 16 bytes, low nibbles first) of chunk c
// of each row, from qs_of(row, c) (rows past nr are zero).
template <class F>
void nibble_rows(const uint8_t* const (&rows)[kGroupRows], int nr, int64_t c, F qs_of,
                 uint8_t (&u)[kGroupRows][32]) {
  for (int r = 0; r < kGroupRows; ++r) {
    const __m256i v = r < nr ? split_nibbles(qs_of(rows[r], c)) : _mm256_setzero_si256();
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(u[r]), v);
  }
}

// The 4 nibble lines at src as 8 lines of u, each nibble an index into
// `table` (a reader's u_table: iq4 levels + 128, mxfp4 levels + 12).
template <class V>
[[gnu::always_inline]] inline void read_table_lines(const uint8_t* src, __m256i table, typename V::Vec (&lines)[8]) {
  read_lines<V, true>(src, lines);
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) lines[g] = V::lookup(table, lines[g]);
}

// The 4 byte lines (values 0..3) of a 16-input sub-block as one line: line
// l in bits 2 l, 2 l + 1 of each byte.
inline void store_crumbs(const Line* lines, uint8_t* dst) {
  for (int k = 0; k < 64; ++k) {
    dst[k] = static_cast<uint8_t>(lines[0].b[k] | (lines[1].b[k] << 2) | (lines[2].b[k] << 4) | (lines[3].b[k] << 6));
  }
}
template <class V>
[[gnu::always_inline]] inline void read_crumbs(const uint8_t* src, typename V::Vec* out) {
  const auto v = V::load(src);
#pragma GCC unroll 4
  for (int l = 0; l < 4; ++l) out[l] = V::and_(V::srl(v, static_cast<unsigned>(2 * l)), V::bytes(3));
}

}  // namespace
}  // namespace troupe::kernels::cpu
