// The packed int8 layout's lines (int8_packed_lines.hpp) as AVX-512 reads
// them: one register a 64-byte line, the 16 rows of a group in its lanes.
// Include only from files built with -mavx512f/bw/vl (internal linkage).
#pragma once

#include <cstdint>

#include "kernels/cpu/x86_intrinsics.hpp"

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

struct Lines512 {
  using Vec = __m512i;  // a line: 4 inputs of each of the 16 rows
  using Ps = __m512;    // one f32 per row
  static constexpr int kRows = 16;

  [[gnu::always_inline]] static Vec load(const uint8_t* line) { return _mm512_loadu_si512(line); }
  [[gnu::always_inline]] static Vec bytes(uint8_t c) { return _mm512_set1_epi8(static_cast<char>(c)); }
  [[gnu::always_inline]] static Vec zero() { return _mm512_setzero_si512(); }
  [[gnu::always_inline]] static Vec and_(Vec a, Vec b) { return _mm512_and_si512(a, b); }
  [[gnu::always_inline]] static Vec or_(Vec a, Vec b) { return _mm512_or_si512(a, b); }
  // 16-bit shifts: the layouts' fields never cross a byte after the masks.
  [[gnu::always_inline]] static Vec srl(Vec v, unsigned n) { return _mm512_srli_epi16(v, n); }
  [[gnu::always_inline]] static Vec sll(Vec v, unsigned n) { return _mm512_slli_epi16(v, n); }
  // mask ? a : b, bit by bit.
  [[gnu::always_inline]] static Vec select(Vec mask, Vec a, Vec b) {
    return _mm512_ternarylogic_epi32(mask, a, b, 0xca);
  }
  // Bytes looked up in a 16-byte table (in both halves of `table`).
  [[gnu::always_inline]] static Vec lookup(__m256i table, Vec idx) {
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm256_castsi256_si128(table)), idx);
  }

  // Per-row values of the group at p: fp16, bf16, u8, i8, and u8 split in nibbles.
  [[gnu::always_inline]] static Ps halves(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  [[gnu::always_inline]] static Ps bf16s(const uint8_t* p) {
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
  }
  [[gnu::always_inline]] static Ps u8(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  [[gnu::always_inline]] static Ps i8(const uint8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  [[gnu::always_inline]] static void u8_nibbles(const uint8_t* p, Ps& low, Ps& high) {
    const __m512i raw = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    low = _mm512_cvtepi32_ps(_mm512_and_si512(raw, _mm512_set1_epi32(0x0f)));
    high = _mm512_cvtepi32_ps(_mm512_srli_epi32(raw, 4));
  }
  [[gnu::always_inline]] static Ps mul(Ps a, Ps b) { return _mm512_mul_ps(a, b); }
  [[gnu::always_inline]] static Ps neg(Ps a) { return _mm512_xor_ps(a, _mm512_set1_ps(-0.0f)); }
  [[gnu::always_inline]] static Ps zero_ps() { return _mm512_setzero_ps(); }
};

}  // namespace
}  // namespace troupe::kernels::cpu
