// The packed int8 layout's lines (int8_packed_lines.hpp) as AVX2 reads
// them: half H of a 64-byte line a register, rows 8 H .. 8 H + 7 of a group
// in its lanes (a line's byte 4 r + i is input i of row r, so each half is
// whole rows). Every byte operation of the layouts acts on each byte alone,
// so the halves read as the whole line does. Include only from files built
// with at least -mavx2 -mf16c (internal linkage).
#pragma once

#include <cstdint>

#include "kernels/cpu/x86_intrinsics.hpp"

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

template <int H>
struct Lines256 {
  static_assert(H == 0 || H == 1);
  using Vec = __m256i;
  using Ps = __m256;
  static constexpr int kRows = 8;

  [[gnu::always_inline]] static Vec load(const uint8_t* line) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(line + 32 * H));
  }
  [[gnu::always_inline]] static Vec bytes(uint8_t c) { return _mm256_set1_epi8(static_cast<char>(c)); }
  [[gnu::always_inline]] static Vec zero() { return _mm256_setzero_si256(); }
  [[gnu::always_inline]] static Vec and_(Vec a, Vec b) { return _mm256_and_si256(a, b); }
  [[gnu::always_inline]] static Vec or_(Vec a, Vec b) { return _mm256_or_si256(a, b); }
  [[gnu::always_inline]] static Vec srl(Vec v, unsigned n) { return _mm256_srli_epi16(v, static_cast<int>(n)); }
  [[gnu::always_inline]] static Vec sll(Vec v, unsigned n) { return _mm256_slli_epi16(v, static_cast<int>(n)); }
  [[gnu::always_inline]] static Vec select(Vec mask, Vec a, Vec b) {
    return _mm256_or_si256(_mm256_and_si256(mask, a), _mm256_andnot_si256(mask, b));
  }
  [[gnu::always_inline]] static Vec lookup(__m256i table, Vec idx) { return _mm256_shuffle_epi8(table, idx); }

  [[gnu::always_inline]] static Ps halves(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * H)));
  }
  [[gnu::always_inline]] static Ps bf16s(const uint8_t* p) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * H)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
  [[gnu::always_inline]] static __m128i eight(const uint8_t* p) {
    return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * H));
  }
  [[gnu::always_inline]] static Ps u8(const uint8_t* p) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(eight(p))); }
  [[gnu::always_inline]] static Ps i8(const uint8_t* p) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(eight(p))); }
  [[gnu::always_inline]] static void u8_nibbles(const uint8_t* p, Ps& low, Ps& high) {
    const __m256i raw = _mm256_cvtepu8_epi32(eight(p));
    low = _mm256_cvtepi32_ps(_mm256_and_si256(raw, _mm256_set1_epi32(0x0f)));
    high = _mm256_cvtepi32_ps(_mm256_srli_epi32(raw, 4));
  }
  [[gnu::always_inline]] static Ps mul(Ps a, Ps b) { return _mm256_mul_ps(a, b); }
  [[gnu::always_inline]] static Ps neg(Ps a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  [[gnu::always_inline]] static Ps zero_ps() { return _mm256_setzero_ps(); }
};

}  // namespace
}  // namespace troupe::kernels::cpu
