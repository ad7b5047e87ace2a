// The block decoders the CUDA GEMV and row dequantization run for q5_0, q5_1
// and the k-quants (kernels/cuda/block_decode.hpp), run here on the host: no
// GPU needed. Every 32-weight chunk must equal core's dequantize_row (checked
// against gguf-py in tests/kernels) bit for bit, on rows from core's
// quantizer and on rows of random bytes, which reach every scale, minimum
// and high-bit pattern.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/cuda/block_decode.hpp"

namespace troupe {
namespace {

// Random bytes with each block's fp16 fields set to finite values (random
// fp16 bits would include NaN and infinities, which compare unequal).
std::vector<uint8_t> random_row(DType t, int64_t n_in, std::mt19937& rng) {
  const DTypeInfo& info = dtype_info(t);
  std::vector<uint8_t> row(static_cast<size_t>(row_bytes(t, n_in)));
  for (uint8_t& b : row) b = static_cast<uint8_t>(rng() & 0xff);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (int64_t blk = 0; blk < n_in / info.block_size; ++blk) {
    uint8_t* b = row.data() + blk * info.block_bytes;
    auto put = [&](int64_t off) {
      const uint16_t h = f32_to_fp16(scale(rng));
      std::memcpy(b + off, &h, 2);
    };
    switch (t) {
      case DType::q5_0: case DType::iq4_nl: case DType::iq4_xs: put(0); break;
      case DType::mxfp4: break;  // any e: 0 and 1 give subnormal scales, 255 with +-12 inf on both sides
      case DType::q5_1: case DType::q4_K: case DType::q5_K: put(0); put(2); break;
      case DType::q6_K: put(static_cast<int64_t>(sizeof(BlockQ6_K)) - 2); break;
      case DType::q3_K: put(static_cast<int64_t>(sizeof(BlockQ3_K)) - 2); break;
      case DType::q2_K:
        put(static_cast<int64_t>(sizeof(BlockQ2_K)) - 4);
        put(static_cast<int64_t>(sizeof(BlockQ2_K)) - 2);
        break;
      default: ADD_FAILURE() << "no block layout for " << dtype_name(t);
    }
  }
  return row;
}

void expect_chunks_match(DType t, const std::vector<uint8_t>& row, int64_t n_in, const std::string& what) {
  std::vector<float> want(static_cast<size_t>(n_in));
  dequantize_row(t, row.data(), want.data(), n_in);
  for (int64_t c = 0; c < n_in / kQK; ++c) {
    float got[kQK];
    ASSERT_TRUE(cuda::decode_block_chunk(row.data(), t, c, got));
    for (int l = 0; l < kQK; ++l) {
      ASSERT_EQ(got[l], want[static_cast<size_t>(c * kQK + l)]) << dtype_name(t) << " " << what << " chunk " << c
                                                                << " weight " << l;
    }
  }
}

TEST(CudaBlockDecode, EveryChunkEqualsDequantizeRow) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int64_t kIn = 1024;
  for (DType t : {DType::q5_0, DType::q5_1, DType::q2_K, DType::q3_K, DType::q4_K, DType::q5_K, DType::q6_K,
                  DType::iq4_nl, DType::iq4_xs, DType::mxfp4}) {
    EXPECT_TRUE(cuda::decodes_blocks(t));
    std::vector<float> x(kIn);
    for (float& v : x) v = normal(rng);
    std::vector<uint8_t> row(static_cast<size_t>(row_bytes(t, kIn)));
    quantize_row(t, x.data(), row.data(), kIn);
    expect_chunks_match(t, row, kIn, "quantized row");
    for (int i = 0; i < 4; ++i) expect_chunks_match(t, random_row(t, kIn, rng), kIn, "random row");
  }
}

TEST(CudaBlockDecode, OtherTypesAreNotBlockDecoded) {
  float w[kQK];
  const std::vector<uint8_t> row(sizeof(BlockQ6_K), 0);  // a whole block of any type, were one decoded
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1}) {
    EXPECT_FALSE(cuda::decodes_blocks(t)) << dtype_name(t);
    EXPECT_FALSE(cuda::decode_block_chunk(row.data(), t, 0, w)) << dtype_name(t);
  }
}

}  // namespace
}  // namespace troupe
