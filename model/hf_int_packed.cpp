// Unpacking compressed-tensors' 4-bit integer matrices: into q4_0 blocks
// where that is exact, else into floats.
#include "model/hf_int_packed.hpp"

#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "model/weight_store.hpp"

namespace troupe {
namespace {

std::string shape_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void expect_tensor(const safetensors::TensorInfo& t, const char* dtype, const std::vector<int64_t>& shape) {
  if (t.dtype != dtype || t.shape != shape) {
    throw Error(Errc::bad_format, t.file + ": tensor '" + t.name + "' is " + t.dtype + " " + shape_str(t.shape) +
                                      ", expected " + dtype + " " + shape_str(shape));
  }
}

// The 4-bit field i of a row of 32-bit little-endian words (the file gives
// no alignment, so each word is copied out).
inline uint32_t nibble(const uint8_t* words, int64_t i) {
  uint32_t w;
  std::memcpy(&w, words + (i / 8) * 4, 4);
  return (w >> (4 * (i % 8))) & 0xfu;
}

}  // namespace

Weight unpack_int4(const safetensors::TensorInfo& packed, const safetensors::TensorInfo& scale,
                   const safetensors::TensorInfo* zero_point, const HfQuantScheme& s, int64_t n_in, int64_t n_out,
                   WeightStore& store, ThreadPool& pool) {
  const int64_t words = (n_in + 7) / 8;
  const int64_t group = s.group_size > 0 ? s.group_size : n_in;
  const int64_t n_groups = (n_in + group - 1) / group;
  expect_tensor(packed, "I32", {n_out, words});
  if (!scale.type) {
    throw Error(Errc::unsupported, scale.file + ": scale '" + scale.name + "' has dtype " + scale.dtype +
                                       "; supported: F32, BF16, F16");
  }
  expect_tensor(scale, scale.dtype.c_str(), {n_out, n_groups});
  if (!s.symmetric) {
    if (zero_point == nullptr) {
      throw Error(Errc::bad_format, packed.file + ": asymmetric tensor '" + packed.name + "' has no zero point");
    }
    expect_tensor(*zero_point, "I32", {(n_out + 7) / 8, n_groups});
  }
  std::vector<float> scales(static_cast<size_t>(n_out * n_groups));
  {
    std::vector<uint8_t> raw(static_cast<size_t>(scale.n_bytes));  // unaligned in the file
    std::memcpy(raw.data(), scale.data, raw.size());
    dequantize_row(*scale.type, raw.data(), scales.data(), n_out * n_groups);
  }
  bool as_q4_0 = s.symmetric && group % kQK == 0 && n_in % kQK == 0;
  for (size_t i = 0; as_q4_0 && i < scales.size(); ++i) as_q4_0 = fp16_to_f32(f32_to_fp16(scales[i])) == scales[i];

  if (as_q4_0) {
    const int64_t blocks = n_in / kQK;
    auto* dst = static_cast<BlockQ4_0*>(store.allocate(static_cast<size_t>(row_bytes(DType::q4_0, n_in) * n_out)));
    pool.parallel_for(n_out, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* row = packed.data + r * words * 4;
        for (int64_t b = 0; b < blocks; ++b) {
          BlockQ4_0& q = dst[r * blocks + b];
          const int64_t c0 = b * kQK;
          q.d = f32_to_fp16(scales[static_cast<size_t>(r * n_groups + c0 / group)]);
          // q4_0 keeps element j in byte j's low nibble and j + 16 in its high one.
          for (int64_t j = 0; j < kQK / 2; ++j) {
            q.qs[j] = static_cast<uint8_t>(nibble(row, c0 + j) | (nibble(row, c0 + j + kQK / 2) << 4));
          }
        }
      }
    });
    return Weight{.data = dst, .type = DType::q4_0, .n_in = n_in, .n_out = n_out};
  }

  const int64_t dst_row = row_bytes(s.to, n_in);
  auto* dst = static_cast<uint8_t*>(store.allocate_transient(static_cast<size_t>(dst_row * n_out)));
  pool.parallel_for(n_out, [&](int64_t r0, int64_t r1) {
    std::vector<float> out(static_cast<size_t>(n_in));
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = packed.data + r * words * 4;
      // Zero points are packed down the columns: row r's is field r % 8 of
      // word [r / 8][g].
      const uint8_t* zrow = s.symmetric ? nullptr : zero_point->data + (r / 8) * n_groups * 4;
      for (int64_t c = 0; c < n_in; ++c) {
        const int64_t g = c / group;
        const float zero = zrow == nullptr ? 0.0f : static_cast<float>(nibble(zrow + g * 4, r % 8)) - 8.0f;
        const float q = static_cast<float>(nibble(row, c)) - 8.0f;
        out[static_cast<size_t>(c)] = (q - zero) * scales[static_cast<size_t>(r * n_groups + g)];
      }
      quantize_row(s.to, out.data(), dst + r * dst_row, n_in);
    }
  });
  return Weight{.data = dst, .type = s.to, .n_in = n_in, .n_out = n_out};
}

}  // namespace troupe
