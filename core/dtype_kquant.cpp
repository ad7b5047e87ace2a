// k-quant quantization. Each sub-block gets the (scale, min) or scale that
// minimises a weighted squared error over a few candidate roundings; the
// super-block then stores those 6-bit (q4_K/q5_K) or 8-bit (q6_K) sub-scales
// relative to fp16 super-scales, and every weight is re-rounded against the
// stored (already quantized) scales, so the bytes decode to the closest
// representable values, not to the pre-rounding fit.
#include "core/dtype_kquant.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "core/dtype.hpp"

namespace troupe::detail {
namespace {

int nearest_int(float v) { return static_cast<int>(std::lrintf(v)); }

// v rounded to the nearest integer, ties to even (as lrintf), for |v| < 2^22:
// adding 1.5 * 2^23 leaves no fraction bits. Plain float arithmetic, so the
// candidate loops below vectorize (lrintf does not without SSE4.1).
float round_even(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return (v + kMagic) - kMagic;
}

// Packs 256 6-bit quants into a q6_K block: chunk c = 4h + k (32 weights) goes
// to the low (k < 2) or high nibbles of ql[64 h + 32 (k & 1) ..] and bits 2k
// of qh[32 h ..].
void pack_q6_K(const uint8_t (&q)[kQK_K], BlockQ6_K& b) {
  std::memset(b.ql, 0, sizeof b.ql);
  std::memset(b.qh, 0, sizeof b.qh);
  for (int c = 0; c < 8; ++c) {
    const int h = c / 4, k = c % 4;
    for (int l = 0; l < 32; ++l) {
      const int v = q[32 * c + l];
      uint8_t& lo = b.ql[64 * h + 32 * (k & 1) + l];
      lo = static_cast<uint8_t>(lo | ((v & 0x0f) << (4 * (k >> 1))));
      uint8_t& hi = b.qh[32 * h + l];
      hi = static_cast<uint8_t>(hi | ((v >> 4) << (2 * k)));
    }
  }
}

// Weighted least squares for x ≈ scale * q + min over n values, q in
// [0, nmax], min <= 0 (the GGUF formats store -min as an unsigned 6-bit
// quantity). Tries roundings from a grid of inverse scales around
// nmax / (max - min) and keeps the fit with the smallest error. w weighs
// errors by magnitude, so large weights (which dominate dot products) are
// kept closer.
void fit_scale_min(const float* x, const float* w, int n, int nmax, float& scale, float& min) {
  float lo = std::min(0.0f, *std::min_element(x, x + n));
  const float hi = *std::max_element(x, x + n);
  if (hi <= lo) {  // constant (zero or negative) sub-block: all in the minimum
    scale = 0.0f;
    min = lo;
    return;
  }
  // The error of a fit (s, m) expands to s² Sqq + 2 s m Sq + m² Sw - 2 s Sqx
  // - 2 m Sx + Sxx: the sums of w, w x and w x² are the same for every
  // candidate, so each candidate costs one pass.
  double sw = 0, sx = 0, sxx = 0;
  float shifted[32];  // x - lo: what the candidates scale
  for (int i = 0; i < n; ++i) {
    sw += w[i];
    sx += double(w[i]) * x[i];
    sxx += double(w[i]) * x[i] * x[i];
    shifted[i] = x[i] - lo;
  }
  double best_err = INFINITY;
  scale = (hi - lo) / static_cast<float>(nmax);
  min = lo;
  const float top = static_cast<float>(nmax);
  float q[32];
  for (int step = -1; step <= 20; ++step) {
    // step -1: plain max/min scaling; 0..20: inverse scales nmax - 1 .. nmax + 1.
    const float iscale = step < 0 ? static_cast<float>(nmax) / (hi - lo)
                                  : (static_cast<float>(nmax) - 1.0f + 0.1f * static_cast<float>(step)) / (hi - lo);
    for (int i = 0; i < n; ++i) q[i] = std::clamp(round_even(iscale * shifted[i]), 0.0f, top);
    // Four partial sums each: a sum in one chain waits on every add (n is
    // 16 or 32).
    double sq4[4] = {}, sqq4[4] = {}, sqx4[4] = {};
    for (int i = 0; i < n; i += 4) {
      for (int k = 0; k < 4; ++k) {
        const double wq = double(w[i + k]) * q[i + k];
        sq4[k] += wq;
        sqq4[k] += wq * q[i + k];
        sqx4[k] += wq * x[i + k];
      }
    }
    const double sq = (sq4[0] + sq4[1]) + (sq4[2] + sq4[3]);
    const double sqq = (sqq4[0] + sqq4[1]) + (sqq4[2] + sqq4[3]);
    const double sqx = (sqx4[0] + sqx4[1]) + (sqx4[2] + sqx4[3]);
    const double det = sw * sqq - sq * sq;
    if (det <= 0) continue;
    double s = (sw * sqx - sq * sx) / det;
    double m = (sqq * sx - sq * sqx) / det;
    if (m > 0) {  // the format cannot add a positive offset
      m = 0;
      s = sqx / sqq;
    }
    if (!(s > 0)) continue;
    const double err = s * s * sqq + 2 * s * m * sq + m * m * sw - 2 * s * sqx - 2 * m * sx + sxx;
    if (err < best_err) {
      best_err = err;
      scale = static_cast<float>(s);
      min = static_cast<float>(m);
    }
  }
}

// Error weights for a sub-block: a floor (the row's RMS) plus |x|.
void magnitude_weights(const float* x, int n, float rms, float* w) {
  for (int i = 0; i < n; ++i) w[i] = rms + std::fabs(x[i]);
}

float block_rms(const float* x, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(x[i]) * x[i];
  return static_cast<float>(std::sqrt(s / n));
}

// Fills d, dmin, the 12 packed scale bytes and the quants q[256] (0..nmax)
// of one q4_K/q5_K super-block.
void quantize_q45_K_block(const float* x, int nmax, uint16_t& d16, uint16_t& dmin16, uint8_t* packed, uint8_t* q) {
  float scales[8], mins[8], w[32];
  const float rms = block_rms(x, static_cast<int>(kQK_K));
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    magnitude_weights(x + 32 * j, 32, rms, w);
    fit_scale_min(x + 32 * j, w, 32, nmax, scales[j], mins[j]);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, -mins[j]);
  }
  d16 = f32_to_fp16(max_scale / 63.0f);
  dmin16 = f32_to_fp16(max_min / 63.0f);
  const float d = fp16_to_f32(d16), dmin = fp16_to_f32(dmin16);
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(d > 0 ? std::clamp(nearest_int(scales[j] / d), 0, 63) : 0);
    m[j] = static_cast<uint8_t>(dmin > 0 ? std::clamp(nearest_int(-mins[j] / dmin), 0, 63) : 0);
  }
  // Inverse of kquant_scale_min: bytes 0..3 scales 0..3 (+ top bits of 4..7),
  // bytes 4..7 mins 0..3 (+ top bits of 4..7), bytes 8..11 low nibbles of 4..7.
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t sj, mj;
    kquant_scale_min(packed, j, sj, mj);  // the values a reader will see
    const float ds = d * sj, dm = dmin * mj;
    for (int l = 0; l < 32; ++l) {
      q[32 * j + l] = static_cast<uint8_t>(ds > 0 ? std::clamp(nearest_int((x[32 * j + l] + dm) / ds), 0, nmax) : 0);
    }
  }
}

// For 16 weights xs: the scale s minimising sum x^2 (x - s q)^2 over a few
// roundings q = round(x * iscale) in [-n_low, n_low), iscale near
// -n_low / xmax (xmax: the value largest in magnitude, which maps to -n_low
// exactly). 0 for a zero sub-block.
float fit_symmetric(const float* xs, int n_low) {
  float xmax = 0.0f;
  for (int l = 0; l < 16; ++l) {
    if (std::fabs(xs[l]) > std::fabs(xmax)) xmax = xs[l];
  }
  float scale = 0.0f;
  if (xmax == 0.0f) return scale;
  // With s = Sqx / Sqq, the weighted error sum x² (x - s q)² is
  // Sxxxx - Sqx² / Sqq: the best candidate has the largest Sqx² / Sqq.
  double best_gain = -INFINITY;
  const float low = -static_cast<float>(n_low), high = static_cast<float>(n_low - 1);
  float q[16];
  for (int step = -9; step <= 9; ++step) {
    const float iscale = -(static_cast<float>(n_low) + 0.1f * static_cast<float>(step)) / xmax;
    for (int l = 0; l < 16; ++l) q[l] = std::clamp(round_even(iscale * xs[l]), low, high);
    double sqx4[4] = {}, sqq4[4] = {};  // partial sums, as in fit_scale_min
    for (int l = 0; l < 16; l += 4) {
      for (int k = 0; k < 4; ++k) {
        const double wq = double(xs[l + k]) * xs[l + k] * q[l + k];
        sqx4[k] += wq * xs[l + k];
        sqq4[k] += wq * q[l + k];
      }
    }
    const double sqx = (sqx4[0] + sqx4[1]) + (sqx4[2] + sqx4[3]);
    const double sqq = (sqq4[0] + sqq4[1]) + (sqq4[2] + sqq4[3]);
    if (sqq <= 0) continue;
    const double gain = sqx * sqx / sqq;
    if (gain > best_gain) {
      best_gain = gain;
      scale = static_cast<float>(sqx / sqq);
    }
  }
  return scale;
}

// The fp16 super-scale d of n signed sub-scales: the one largest in
// magnitude maps to `lowest` (-32 for 6-bit, -128 for 8-bit sub-scales),
// the others in proportion (d carries the sign). 0 when all are 0.
float super_scale(const float* scales, int n, float lowest) {
  float max_scale = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(scales[j]) > std::fabs(max_scale)) max_scale = scales[j];
  }
  return max_scale != 0.0f ? fp16_to_f32(f32_to_fp16(max_scale / lowest)) : 0.0f;
}

// Sets the 2 low bits of quant q (0..7) of weight 32 j + l in a q2_K/q3_K qs
// (core/dtype.hpp: bits 2k, 2k + 1 of qs[32 h + l] for chunk j = 4 h + k).
void put_crumb(uint8_t* qs, int j, int l, int q) {
  uint8_t& byte = qs[32 * (j / 4) + l];
  byte = static_cast<uint8_t>(byte | ((q & 3) << (2 * (j % 4))));
}

// The midpoints between neighbouring iq4 levels (which are sorted).
constexpr auto kIq4Midpoints = [] {
  std::array<float, 15> m{};
  for (int q = 0; q < 15; ++q) m[q] = 0.5f * static_cast<float>(kIq4Levels[q] + kIq4Levels[q + 1]);
  return m;
}();

// The index of the iq4 level nearest to v (levels in scale units; a tie
// goes to the lower level): how many midpoints v lies above. Fifteen
// compares and no branch, which random weights would mispredict.
int nearest_iq4_level(float v) {
  int q = 0;
  for (float m : kIq4Midpoints) q += v > m ? 1 : 0;
  return q;
}

// The scale s for n weights xs under which their nearest iq4 levels fit
// best: first the value largest in magnitude on level -127, then one
// weighted least-squares refit of s to the levels that chose. 0 for zeros.
float fit_iq4(const float* xs, int n) {
  float xmax = 0.0f;
  for (int l = 0; l < n; ++l) {
    if (std::fabs(xs[l]) > std::fabs(xmax)) xmax = xs[l];
  }
  if (xmax == 0.0f) return 0.0f;
  const float s = xmax / -127.0f;
  double sqx = 0, sqq = 0;
  for (int l = 0; l < n; ++l) {
    const double q = kIq4Levels[nearest_iq4_level(xs[l] / s)];
    const double w = double(xs[l]) * xs[l];
    sqx += w * q * xs[l];
    sqq += w * q * q;
  }
  return sqq > 0 ? static_cast<float>(sqx / sqq) : s;
}

// The 32 weights x of one block or sub-block under scale ds, as q4_0-style
// nibbles into qs[16].
void put_iq4_nibbles(const float* x, float ds, uint8_t* qs) {
  for (int l = 0; l < 16; ++l) {
    const int lo = ds != 0.0f ? nearest_iq4_level(x[l] / ds) : 8;  // level 8 is 1: nearest 0 is 1 or -10
    const int hi = ds != 0.0f ? nearest_iq4_level(x[l + 16] / ds) : 8;
    qs[l] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

}  // namespace

void quantize_row_iq4_nl(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockIQ4_NL*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    b[i].d = f32_to_fp16(fit_iq4(x, kQK));
    put_iq4_nibbles(x, fp16_to_f32(b[i].d), b[i].qs);
  }
}

void quantize_row_iq4_xs(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockIQ4_XS*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float scales[8];
    for (int j = 0; j < 8; ++j) scales[j] = fit_iq4(x + 32 * j, 32);
    const float d = super_scale(scales, 8, -32.0f);
    BlockIQ4_XS out{};
    out.d = f32_to_fp16(d);
    for (int j = 0; j < 8; ++j) {
      const int sc = d != 0.0f ? std::clamp(nearest_int(scales[j] / d), -32, 31) : 0;
      const int stored = sc + 32;
      out.scales_l[j / 2] = static_cast<uint8_t>(out.scales_l[j / 2] | ((stored & 0x0f) << (4 * (j % 2))));
      out.scales_h = static_cast<uint16_t>(out.scales_h | ((stored >> 4) << (2 * j)));
      put_iq4_nibbles(x + 32 * j, d * static_cast<float>(sc), out.qs + 16 * j);
    }
    std::memcpy(&b[i], &out, sizeof out);
  }
}

void quantize_row_q2_K(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ2_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    // As q4_K with sub-blocks of 16, 2-bit quants and 4-bit scales and mins.
    float scales[16], mins[16], w[16];
    const float rms = block_rms(x, static_cast<int>(kQK_K));
    float max_scale = 0.0f, max_min = 0.0f;
    for (int s = 0; s < 16; ++s) {
      magnitude_weights(x + 16 * s, 16, rms, w);
      fit_scale_min(x + 16 * s, w, 16, 3, scales[s], mins[s]);
      max_scale = std::max(max_scale, scales[s]);
      max_min = std::max(max_min, -mins[s]);
    }
    b[i].d = f32_to_fp16(max_scale / 15.0f);
    b[i].dmin = f32_to_fp16(max_min / 15.0f);
    const float d = fp16_to_f32(b[i].d), dmin = fp16_to_f32(b[i].dmin);
    std::memset(b[i].qs, 0, sizeof b[i].qs);
    for (int s = 0; s < 16; ++s) {
      const int sc = d > 0 ? std::clamp(nearest_int(scales[s] / d), 0, 15) : 0;
      const int m = dmin > 0 ? std::clamp(nearest_int(-mins[s] / dmin), 0, 15) : 0;
      b[i].scales[s] = static_cast<uint8_t>(sc | (m << 4));
      const float ds = d * static_cast<float>(sc), dm = dmin * static_cast<float>(m);
      for (int l = 0; l < 16; ++l) {
        const int q = ds > 0 ? std::clamp(nearest_int((x[16 * s + l] + dm) / ds), 0, 3) : 0;
        put_crumb(b[i].qs, s / 2, 16 * (s % 2) + l, q);
      }
    }
  }
}

void quantize_row_q3_K(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ3_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    // As q6_K with 3-bit quants in [-4, 4) and 6-bit scales in [-32, 32).
    float scales[16];
    for (int s = 0; s < 16; ++s) scales[s] = fit_symmetric(x + 16 * s, 4);
    const float d = super_scale(scales, 16, -32.0f);
    BlockQ3_K out{};
    out.d = f32_to_fp16(d);
    for (int s = 0; s < 16; ++s) {
      const int sc = d != 0.0f ? std::clamp(nearest_int(scales[s] / d), -32, 31) : 0;
      // The inverse of q3_K_scale: low nibbles in bytes 0-7, top 2 bits in 8-11.
      const int stored = sc + 32;
      out.scales[s % 8] = static_cast<uint8_t>(out.scales[s % 8] | ((stored & 0x0f) << (4 * (s / 8))));
      out.scales[8 + s % 4] = static_cast<uint8_t>(out.scales[8 + s % 4] | ((stored >> 4) << (2 * (s / 4))));
      const float ds = d * static_cast<float>(sc);
      for (int l = 0; l < 16; ++l) {
        const int q = (ds != 0.0f ? std::clamp(nearest_int(x[16 * s + l] / ds), -4, 3) : 0) + 4;
        const int j = s / 2, lj = 16 * (s % 2) + l;
        put_crumb(out.qs, j, lj, q);
        out.hmask[lj] = static_cast<uint8_t>(out.hmask[lj] | ((q >> 2) << j));
      }
    }
    std::memcpy(&b[i], &out, sizeof out);
  }
}

void quantize_row_q4_K(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ4_K*>(dst);
  uint8_t q[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    quantize_q45_K_block(x, 15, b[i].d, b[i].dmin, b[i].scales, q);
    for (int j = 0; j < 4; ++j) {  // sub-blocks 2j (low nibbles) and 2j + 1 (high)
      for (int l = 0; l < 32; ++l) b[i].qs[32 * j + l] = static_cast<uint8_t>(q[64 * j + l] | (q[64 * j + 32 + l] << 4));
    }
  }
}

void quantize_row_q5_K(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ5_K*>(dst);
  uint8_t q[kQK_K];
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    quantize_q45_K_block(x, 31, b[i].d, b[i].dmin, b[i].scales, q);
    std::memset(b[i].qh, 0, sizeof b[i].qh);
    for (int j = 0; j < 8; ++j) {
      for (int l = 0; l < 32; ++l) b[i].qh[l] = static_cast<uint8_t>(b[i].qh[l] | ((q[32 * j + l] >> 4) << j));
    }
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) {
        b[i].qs[32 * j + l] = static_cast<uint8_t>((q[64 * j + l] & 0x0f) | ((q[64 * j + 32 + l] & 0x0f) << 4));
      }
    }
  }
}

void quantize_row_q6_K(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<BlockQ6_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = fit_symmetric(x + 16 * j, 32);
    const float d = super_scale(scales, 16, -128.0f);
    b[i].d = f32_to_fp16(d);
    for (int j = 0; j < 16; ++j) {
      b[i].scales[j] = static_cast<int8_t>(d != 0.0f ? std::clamp(nearest_int(scales[j] / d), -128, 127) : 0);
    }
    uint8_t q[kQK_K];
    for (int j = 0; j < 16; ++j) {
      const float ds = d * b[i].scales[j];
      for (int l = 0; l < 16; ++l) {
        q[16 * j + l] = static_cast<uint8_t>(ds != 0.0f ? std::clamp(nearest_int(x[16 * j + l] / ds), -32, 31) + 32 : 32);
      }
    }
    pack_q6_K(q, b[i]);
  }
}

}  // namespace troupe::detail
