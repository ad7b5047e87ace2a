// Reading the 4-bit integer layouts (compressed-tensors, GPTQ, AWQ) into
// q4_0 or q4_1 blocks where that is exact, else into floats.
#include "model/hf_int4.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "model/weight_store.hpp"

namespace troupe {
namespace {

using safetensors::TensorInfo;

// One of the tensors of codes' matrix, checked (dtype nullptr: any).
const TensorInfo& expect_tensor(const TensorInfo* t, const char* role, const TensorInfo& codes, const char* dtype,
                                const std::vector<int64_t>& shape) {
  if (t == nullptr)
    throw Error(Errc::bad_format, codes.file + ": quantized tensor '" + codes.name + "' has no " + role);
  if ((dtype != nullptr && t->dtype != dtype) || t->shape != shape) {
    throw Error(Errc::bad_format, t->file + ": tensor '" + t->name + "' is " + t->dtype + " " +
                                      safetensors::shape_string(t->shape) + ", expected " +
                                      (dtype != nullptr ? dtype : "a float") + " " + safetensors::shape_string(shape));
  }
  return *t;
}

// Field i (4 bits) of 32-bit little-endian word w of a tensor: the file
// gives no alignment, so each word is copied out.
inline uint32_t field(const TensorInfo& t, int64_t w, int64_t i) {
  uint32_t word;
  std::memcpy(&word, t.data + w * 4, 4);
  return (word >> (4 * i)) & 0xfu;
}

// AWQ packs the 8 outputs of a word in the order 0 2 4 6 1 3 5 7: output
// o % 8 sits in field kAwqField[o % 8].
constexpr int kAwqField[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// One matrix in a common form: each row's group scales and unsigned zero
// points (8 for a symmetric scheme; GPTQ's first format stores zero - 1, so
// up to 16), each column's group, and a reader of the codes of a tile of
// rows ([rows][n_in], 0..15).
struct Int4Matrix {
  int64_t n_groups = 0;
  std::vector<float> scale;    // [n_out][n_groups]
  std::vector<uint8_t> zero;   // [n_out][n_groups]
  std::vector<int32_t> group;  // [n_in]
  std::function<void(int64_t r0, int64_t r1, uint8_t* codes)> read;
};

Int4Matrix compressed_tensors(const Int4Tensors& t, const HfQuantScheme& s, int64_t n_in, int64_t n_out) {
  const TensorInfo& name = *t.codes;
  const int64_t gs = s.group_size > 0 ? s.group_size : n_in, words = (n_in + 7) / 8;
  Int4Matrix m{.n_groups = (n_in + gs - 1) / gs};
  const TensorInfo& codes = expect_tensor(t.codes, "codes", name, "I32", {n_out, words});
  m.scale = scale_floats(expect_tensor(t.scale, "scale", name, nullptr, {n_out, m.n_groups}));
  m.zero.assign(static_cast<size_t>(n_out * m.n_groups), 8);
  if (!s.symmetric) {
    // Packed down the columns: row r's zero is field r % 8 of word [r / 8][g].
    const TensorInfo& z = expect_tensor(t.zero, "zero point", name, "I32", {(n_out + 7) / 8, m.n_groups});
    for (int64_t r = 0; r < n_out; ++r) {
      for (int64_t g = 0; g < m.n_groups; ++g) {
        m.zero[static_cast<size_t>(r * m.n_groups + g)] =
            static_cast<uint8_t>(field(z, (r / 8) * m.n_groups + g, r % 8));
      }
    }
  }
  m.group.resize(static_cast<size_t>(n_in));
  for (int64_t c = 0; c < n_in; ++c) m.group[static_cast<size_t>(c)] = static_cast<int32_t>(c / gs);
  m.read = [&codes, n_in, words](int64_t r0, int64_t r1, uint8_t* out) {
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < n_in; ++c)
        out[(r - r0) * n_in + c] = static_cast<uint8_t>(field(codes, r * words + c / 8, c % 8));
    }
  };
  return m;
}

// GPTQ and AWQ store scales [n_groups, n_out] and zeros [n_groups, n_out / 8]
// across the outputs; kAwq picks AWQ's field order.
template <bool kAwq>
void read_output_major(Int4Matrix& m, const Int4Tensors& t, const HfQuantScheme& s, int64_t n_out) {
  const TensorInfo& name = *t.codes;
  const std::vector<float> scales = scale_floats(expect_tensor(t.scale, "scales", name, nullptr, {m.n_groups, n_out}));
  const TensorInfo& z = expect_tensor(t.zero, "qzeros", name, "I32", {m.n_groups, n_out / 8});
  m.scale.resize(static_cast<size_t>(n_out * m.n_groups));
  m.zero.resize(m.scale.size());
  for (int64_t g = 0; g < m.n_groups; ++g) {
    for (int64_t o = 0; o < n_out; ++o) {
      const size_t at = static_cast<size_t>(o * m.n_groups + g);
      m.scale[at] = scales[static_cast<size_t>(g * n_out + o)];
      const uint32_t q = field(z, g * (n_out / 8) + o / 8, kAwq ? kAwqField[o % 8] : o % 8);
      m.zero[at] = static_cast<uint8_t>(q + static_cast<uint32_t>(s.zero_offset));
    }
  }
}

Int4Matrix gptq(const Int4Tensors& t, const HfQuantScheme& s, int64_t n_in, int64_t n_out) {
  const TensorInfo& name = *t.codes;
  const int64_t gs = s.group_size > 0 ? s.group_size : n_in;
  Int4Matrix m{.n_groups = (n_in + gs - 1) / gs};
  const TensorInfo& codes = expect_tensor(t.codes, "qweight", name, "I32", {n_in / 8, n_out});
  read_output_major<false>(m, t, s, n_out);
  m.group.resize(static_cast<size_t>(n_in));
  if (t.g_idx != nullptr) {
    // act-order checkpoints quantized the columns in another order: each
    // column names its group.
    const TensorInfo& g = expect_tensor(t.g_idx, "g_idx", name, "I32", {n_in});
    std::memcpy(m.group.data(), g.data, static_cast<size_t>(n_in) * 4);
    for (const int32_t v : m.group) {
      if (v < 0 || v >= m.n_groups) {
        throw Error(Errc::bad_format, g.file + ": tensor '" + g.name + "' names group " + std::to_string(v) + " of " +
                                          std::to_string(m.n_groups));
      }
    }
  } else {
    for (int64_t c = 0; c < n_in; ++c) m.group[static_cast<size_t>(c)] = static_cast<int32_t>(c / gs);
  }
  // Input k of output o: field k % 8 of word [k / 8][o].
  m.read = [&codes, n_in, n_out](int64_t r0, int64_t r1, uint8_t* out) {
    for (int64_t k = 0; k < n_in; ++k) {
      for (int64_t r = r0; r < r1; ++r)
        out[(r - r0) * n_in + k] = static_cast<uint8_t>(field(codes, (k / 8) * n_out + r, k % 8));
    }
  };
  return m;
}

Int4Matrix awq(const Int4Tensors& t, const HfQuantScheme& s, int64_t n_in, int64_t n_out) {
  const TensorInfo& name = *t.codes;
  const int64_t gs = s.group_size > 0 ? s.group_size : n_in;
  Int4Matrix m{.n_groups = (n_in + gs - 1) / gs};
  const TensorInfo& codes = expect_tensor(t.codes, "qweight", name, "I32", {n_in, n_out / 8});
  read_output_major<true>(m, t, s, n_out);
  m.group.resize(static_cast<size_t>(n_in));
  for (int64_t c = 0; c < n_in; ++c) m.group[static_cast<size_t>(c)] = static_cast<int32_t>(c / gs);
  // Input k of output o: field kAwqField[o % 8] of word [k][o / 8].
  m.read = [&codes, n_in, n_out](int64_t r0, int64_t r1, uint8_t* out) {
    for (int64_t k = 0; k < n_in; ++k) {
      for (int64_t r = r0; r < r1; ++r) {
        out[(r - r0) * n_in + k] = static_cast<uint8_t>(field(codes, k * (n_out / 8) + r / 8, kAwqField[r % 8]));
      }
    }
  };
  return m;
}

// Whether every block of 32 inputs lies in one group and every scale is on
// fp16's grid: then the groups are q4_0 / q4_1 blocks.
bool as_blocks(const Int4Matrix& m, int64_t n_in) {
  if (n_in % kQK != 0) return false;
  for (int64_t c = 0; c < n_in; ++c) {
    if (m.group[static_cast<size_t>(c)] != m.group[static_cast<size_t>(c - c % kQK)]) return false;
  }
  return on_fp16_grid(m.scale);
}

}  // namespace

Weight read_int4(const Int4Tensors& t, const HfQuantScheme& s, int64_t n_in, int64_t n_out, WeightStore& store,
                 ThreadPool& pool) {
  if ((s.kind != HfQuantScheme::Kind::int4_packed) && (n_in % 8 != 0 || n_out % 8 != 0)) {
    throw Error(Errc::bad_format, t.codes->file + ": tensor '" + t.codes->name + "' packs a [" + std::to_string(n_out) +
                                      ", " + std::to_string(n_in) +
                                      "] matrix; GPTQ and AWQ need both sides a multiple of 8");
  }
  const Int4Matrix m = s.kind == HfQuantScheme::Kind::gptq  ? gptq(t, s, n_in, n_out)
                       : s.kind == HfQuantScheme::Kind::awq ? awq(t, s, n_in, n_out)
                                                            : compressed_tensors(t, s, n_in, n_out);
  const bool blocks = as_blocks(m, n_in);
  const bool centered = std::all_of(m.zero.begin(), m.zero.end(), [](uint8_t z) { return z == 8; });
  const DType type = !blocks ? s.to : centered ? DType::q4_0 : DType::q4_1;
  const int64_t dst_row = row_bytes(type, n_in);
  auto* dst = static_cast<uint8_t*>(type == s.to ? store.allocate_transient(static_cast<size_t>(dst_row * n_out))
                                                 : store.allocate(static_cast<size_t>(dst_row * n_out)));
  constexpr int64_t kTile = 64;  // rows read at once: GPTQ's and AWQ's words run across the outputs
  pool.parallel_for((n_out + kTile - 1) / kTile, [&](int64_t t0, int64_t t1) {
    std::vector<uint8_t> codes(static_cast<size_t>(kTile * n_in));
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t tile = t0; tile < t1; ++tile) {
      const int64_t r0 = tile * kTile, r1 = std::min(r0 + kTile, n_out);
      m.read(r0, r1, codes.data());
      for (int64_t r = r0; r < r1; ++r) {
        const uint8_t* q = codes.data() + (r - r0) * n_in;
        const float* scale = m.scale.data() + r * m.n_groups;
        const uint8_t* zero = m.zero.data() + r * m.n_groups;
        uint8_t* out = dst + r * dst_row;
        if (type == s.to) {
          for (int64_t c = 0; c < n_in; ++c) {
            const int32_t g = m.group[static_cast<size_t>(c)];
            row[static_cast<size_t>(c)] = (static_cast<float>(q[c]) - static_cast<float>(zero[g])) * scale[g];
          }
          quantize_row(type, row.data(), out, n_in);
          continue;
        }
        for (int64_t b = 0; b < n_in / kQK; ++b) {
          const int32_t g = m.group[static_cast<size_t>(b * kQK)];
          // q4_0 and q4_1 keep element j in byte j's low nibble and j + 16 in its high one.
          uint8_t* qs;
          if (type == DType::q4_0) {
            auto* blk = reinterpret_cast<BlockQ4_0*>(out) + b;
            blk->d = f32_to_fp16(scale[g]);
            qs = blk->qs;
          } else {
            auto* blk = reinterpret_cast<BlockQ4_1*>(out) + b;
            blk->d = f32_to_fp16(scale[g]);
            blk->m = f32_to_fp16(-scale[g] * static_cast<float>(zero[g]));  // exact in f32, rounded once
            qs = blk->qs;
          }
          const uint8_t* bq = q + b * kQK;
          for (int64_t j = 0; j < kQK / 2; ++j) qs[j] = static_cast<uint8_t>(bq[j] | (bq[j + kQK / 2] << 4));
        }
      }
    }
  });
  return Weight{.data = dst, .type = type, .n_in = n_in, .n_out = n_out};
}

}  // namespace troupe
