// The AMX prefill of the packed f32 path (f32_packed.hpp) at the reduced
// precisions (core/cpu_features.hpp, F32Precision). At high, each operand
// is split into a bf16 high part and a bf16 low part (the rounding of the
// remainder), and the product is taken as three bf16 products,
//   x·w ≈ x_hi·w_lo + x_lo·w_hi + x_hi·w_hi   (x_lo·w_lo dropped),
// run as one AMX-BF16 product over three times the inputs: each token's
// activations laid out [x_hi | x_lo | x_hi], and each 16-row group expanded
// once per call into [w_lo | w_hi | w_hi] (bf16_packed.hpp's group layout),
// so the tile kernel of the bf16 path runs it unchanged. A split keeps 16 of
// an f32's 24 significant bits (|x − x_hi − x_lo| <= 2^-16 |x|), so with
// the dropped term a product is off by at most 3 · 2^-16 of itself, and a
// result within 3 · 2^-16 Σ|x w| of the exact sum plus f32 accumulation. At
// medium, only x_hi·w_hi (one part): within about 2^-7 Σ|x w|, as the bf16
// path of f16 weights. AMX runs the three products faster than one core's
// f32 FMAs run one (docs/performance.md, "f32 weights on AMX"). Built with
// -mavx512bf16.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/bf16_packed.hpp"
#include "kernels/cpu/f32_packed.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include "kernels/cpu/packed_groups.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/simd_avx512.hpp"
#include "kernels/cpu/weight_prefetch.hpp"

namespace troupe::kernels::detail {
namespace {

int64_t k_padded(int64_t n_in) { return (n_in + kBf16KPad - 1) / kBf16KPad * kBf16KPad; }

// The high parts of 16 floats as bf16 (nearest even) and, as f32, the
// remainders they leave, which f32 holds exactly.
inline __m256i split(__m512 v, __m512& rest) {
  const __m256i hi = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  rest = _mm512_sub_ps(v, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16)));
  return hi;
}

// [n_tokens rounded up to kBf16TokenPad][parts k_pad] bf16: x_hi | x_lo |
// x_hi (3 parts) or x_hi (1), each part's inputs past n_in and the rows past
// n_tokens zero.
Bf16Acts split_acts(const float* x, int64_t n_tokens, int64_t n_in, int parts, ThreadPool& pool) {
  const int64_t kp = k_padded(n_in);
  Bf16Acts a;
  a.n_tokens = n_tokens;
  a.k_pad = parts * kp;
  const int64_t rows = (n_tokens + kBf16TokenPad - 1) / kBf16TokenPad * kBf16TokenPad;
  auto* out = reinterpret_cast<uint16_t*>(scratch(Scratch::bf16_acts, static_cast<size_t>(rows * a.k_pad) * 2));
  auto split_rows = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* xr = x + t * n_in;
      uint16_t* row = out + t * a.k_pad;  // parts of kp: x_hi, then x_lo and x_hi again at 3 parts
      for (int64_t i = 0; i < n_in; i += 16) {
        const __mmask16 m = n_in - i >= 16 ? __mmask16{0xffff} : cpu::tail_mask(n_in - i);
        __m512 rest;
        const __m256i h = split(_mm512_maskz_loadu_ps(m, xr + i), rest);
        _mm256_mask_storeu_epi16(row + i, m, h);
        if (parts == 3) {
          _mm256_mask_storeu_epi16(row + kp + i, m, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(rest)));
          _mm256_mask_storeu_epi16(row + 2 * kp + i, m, h);
        }
      }
      for (int part = 0; part < parts; ++part) std::fill(row + part * kp + n_in, row + (part + 1) * kp, uint16_t{0});
    }
  };
  pool.parallel_for(n_tokens, split_rows);
  std::fill(out + n_tokens * a.k_pad, out + rows * a.k_pad, uint16_t{0});
  a.x = out;
  return a;
}

// Word 2 r of a pair line is row r's first input, word 2 r + 1 its second.
inline __m512i pair_line(__m512 first, __m512 second, __m512i interleave) {
  const __m512i halves = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(second, first));  // [first | second]
  return _mm512_permutexvar_epi16(interleave, halves);
}

// One f32 group (a 64-byte line of the 16 rows per input) into `out` as
// w_lo | w_hi | w_hi (3 parts) or w_hi (1), each part kp / 2 pair lines,
// zero past n_in.
void expand_group(const uint8_t* group, int64_t n_in, int64_t kp, int parts, uint8_t* out) {
  alignas(64) static constexpr uint16_t kInterleave[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                           21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                           11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  const __m512i high_word = _mm512_set1_epi32(static_cast<int32_t>(0xffff0000u));
  const int64_t part = kp / 2 * 64;  // bytes
  auto line = [&](int64_t k) {
    return k < n_in ? _mm512_load_ps(reinterpret_cast<const float*>(group + k * 64)) : _mm512_setzero_ps();
  };
  for (int64_t p = 0; p < kp / 2; ++p) {
    cpu::prefetch_ahead(group + 2 * p * 64);
    cpu::prefetch_ahead(group + 2 * p * 64 + 64);
    const __m512 first = line(2 * p), second = line(2 * p + 1);
    const __m512i hi = pair_line(first, second, interleave);
    uint8_t* dst = out + p * 64;
    if (parts == 1) {
      _mm512_store_si512(dst, hi);
      continue;
    }
    // The high parts back as f32: row r's first input in the low word of
    // lane r, its second in the high word.
    const __m512 first_lo = _mm512_sub_ps(first, _mm512_castsi512_ps(_mm512_slli_epi32(hi, 16)));
    const __m512 second_lo = _mm512_sub_ps(second, _mm512_castsi512_ps(_mm512_and_si512(hi, high_word)));
    _mm512_store_si512(dst, pair_line(first_lo, second_lo, interleave));
    _mm512_store_si512(dst + part, hi);
    _mm512_store_si512(dst + 2 * part, hi);
  }
}

}  // namespace

void matmul_f32_packed_amx(float* y, const float* x, const void* packed, int64_t n_tokens, int64_t n_in, int64_t n_out,
                           F32Precision precision, ThreadPool& pool) {
  const int parts = precision == F32Precision::medium ? 1 : 3;
  const Bf16Acts a = split_acts(x, n_tokens, n_in, parts, pool);
  const auto* bytes = static_cast<const uint8_t*>(packed);
  const int64_t kp = k_padded(n_in), stride = f32_group_bytes(n_in);
  const int64_t out_bytes = bf16_group_bytes(a.k_pad), chunk = amx_chunk_groups(a.k_pad);
  const int64_t groups = n_packed_groups(n_out);
  // Threads take chunks of up to 1 MiB of expanded groups in turn, as the
  // bf16 and int8 paths' AMX prefill.
  pool.parallel_dynamic(groups, amx_thread_grain(groups, a.k_pad, pool.size()), [&](int64_t g0, int64_t g1) {
    uint8_t* buf = scratch(Scratch::bf16_groups, static_cast<size_t>(chunk * out_bytes));
    for (int64_t g = g0; g < g1; g += chunk) {
      const int64_t n = std::min(chunk, g1 - g);
      for (int64_t i = 0; i < n; ++i) expand_group(bytes + (g + i) * stride, n_in, kp, parts, buf + i * out_bytes);
      amx_bf16_groups(a, buf, out_bytes, n, y + g * kBf16GroupRows, n_out, n_out - g * kBf16GroupRows);
    }
  });
}

}  // namespace troupe::kernels::detail

#endif  // x86
