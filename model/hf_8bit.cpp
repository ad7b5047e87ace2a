// 8-bit matrices with scales at load: float8 e4m3 dequantized, int8 kept
// as q8_0 blocks where that is exact.
#include "model/hf_8bit.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "model/weight_store.hpp"

namespace troupe {
namespace {

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[static_cast<size_t>(b)] = e4m3_to_f32(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

const std::array<float, 256>& int8_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[static_cast<size_t>(b)] = static_cast<float>(static_cast<int8_t>(b));
    return t;
  }();
  return table;
}

}  // namespace

float e4m3_to_f32(uint8_t b) {
  const float sign = (b & 0x80u) != 0 ? -1.0f : 1.0f;
  const int exp = (b >> 3) & 0xf;
  const int mant = b & 0x7;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant/8 x 2^-6
  return sign * std::ldexp(static_cast<float>(8 + mant), exp - 10);      // (1 + mant/8) x 2^(exp-7)
}

Weight read_8bit(const safetensors::TensorInfo& w, const safetensors::TensorInfo& scale, const HfQuantScheme& s,
                 WeightStore& store, ThreadPool& pool) {
  const int64_t n_out = w.shape.at(0), n_in = w.shape.at(1);
  const std::vector<float> scales = scale_floats(scale);
  // The grid [sr, sc] of blocks [br, bc] the scale's shape names.
  const std::vector<int64_t>& sh = scale.shape;
  const int64_t n_scales = scale.n_elements();
  int64_t br = 0, bc = 0;
  if (n_scales == 1 && sh.size() <= 2) {
    br = n_out, bc = n_in;  // one per matrix
  } else if ((sh.size() == 1 && sh[0] == n_out) || (sh.size() == 2 && sh[0] == n_out && sh[1] == 1)) {
    br = 1, bc = n_in;  // one per row
  } else if (s.block_rows > 0 && sh.size() == 2 && sh[0] == (n_out + s.block_rows - 1) / s.block_rows &&
             sh[1] == (n_in + s.block_cols - 1) / s.block_cols) {
    br = s.block_rows, bc = s.block_cols;
  } else {
    std::string want = "[] or [" + std::to_string(n_out) + ", 1]";
    if (s.block_rows > 0) {
      want += " or [" + std::to_string((n_out + s.block_rows - 1) / s.block_rows) + ", " +
              std::to_string((n_in + s.block_cols - 1) / s.block_cols) + "] (blocks of " +
              std::to_string(s.block_rows) + "x" + std::to_string(s.block_cols) + ")";
    }
    throw Error(Errc::bad_format, scale.file + ": scale '" + scale.name + "' has shape " +
                                      safetensors::shape_string(sh) + " for 8-bit matrix '" + w.name + "' " +
                                      safetensors::shape_string(w.shape) + ", expected " + want);
  }
  const int64_t sc = (n_in + bc - 1) / bc;
  const bool int8 = w.dtype == "I8";
  // int8 rows whose blocks of 32 share a scale on fp16's grid are q8_0
  // blocks, d x q; -128 is left out (q8_0 holds -127..127, and the int8
  // kernels' sign trick counts on it).
  const bool as_q8_0 = int8 && n_in % kQK == 0 && bc % kQK == 0 && on_fp16_grid(scales) &&
                       std::find(w.data, w.data + n_out * n_in, uint8_t{0x80}) == w.data + n_out * n_in;
  if (as_q8_0) {
    const int64_t blocks = n_in / kQK;
    auto* q = static_cast<BlockQ8_0*>(store.allocate(static_cast<size_t>(row_bytes(DType::q8_0, n_in) * n_out)));
    pool.parallel_for(n_out, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const float* rs = scales.data() + (r / br) * sc;
        for (int64_t b = 0; b < blocks; ++b) {
          BlockQ8_0& blk = q[r * blocks + b];
          blk.d = f32_to_fp16(rs[b * kQK / bc]);
          std::memcpy(blk.qs, w.data + r * n_in + b * kQK, kQK);
        }
      }
    });
    return Weight{.data = q, .type = DType::q8_0, .n_in = n_in, .n_out = n_out};
  }
  const std::array<float, 256>& lut = int8 ? int8_table() : e4m3_table();
  const int64_t dst_row = row_bytes(s.to, n_in);
  auto* dst = static_cast<uint8_t*>(store.allocate_transient(static_cast<size_t>(dst_row * n_out)));
  pool.parallel_for(n_out, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* src = w.data + r * n_in;
      const float* rs = scales.data() + (r / br) * sc;
      for (int64_t c0 = 0; c0 < n_in; c0 += bc) {
        const float f = rs[c0 / bc];
        const int64_t c1 = std::min(c0 + bc, n_in);
        for (int64_t c = c0; c < c1; ++c) row[static_cast<size_t>(c)] = lut[src[c]] * f;
      }
      quantize_row(s.to, row.data(), dst + r * dst_row, n_in);
    }
  });
  return Weight{.data = dst, .type = s.to, .n_in = n_in, .n_out = n_out};
}

}  // namespace troupe
