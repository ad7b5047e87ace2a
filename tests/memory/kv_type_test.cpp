// KV element types: names, row sizes (the ~3.8x of q8_0 the byte budget
// relies on), the reference row conversions against independent
// arithmetic, and the byte sizes `--kv-memory` accepts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "memory/kv_type.hpp"

namespace troupe {
namespace {

TEST(KvType, NamesRoundTripAndUnknownNamesAreRefused) {
  for (KvType t : {KvType::f32, KvType::f16, KvType::bf16, KvType::q8_0}) EXPECT_EQ(parse_kv_type(kv_type_name(t)), t);
  try {
    parse_kv_type("q4_0");
    FAIL() << "q4_0 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("expected f32, f16, bf16 or q8_0"), std::string::npos) << e.what();
  }
}

TEST(KvType, RowBytes) {
  EXPECT_EQ(kv_row_bytes(KvType::f32, 64), 256);
  EXPECT_EQ(kv_row_bytes(KvType::f16, 64), 128);
  EXPECT_EQ(kv_row_bytes(KvType::bf16, 64), 128);
  EXPECT_EQ(kv_row_bytes(KvType::q8_0, 64), 64 + 2 * 2);   // two groups of 32
  EXPECT_EQ(kv_row_bytes(KvType::q8_0, 8), 8 + 2);         // one short group
  EXPECT_EQ(kv_row_bytes(KvType::q8_0, 80), 80 + 3 * 2);   // 32 + 32 + 16
  // SmolLM2-135M: 30 layers, 3 kv heads of 64. q8_0 holds 256/68 = 3.76x the tokens.
  EXPECT_EQ(kv_token_bytes(KvType::f32, 30, 3, 64), 46080);
  EXPECT_EQ(kv_token_bytes(KvType::q8_0, 30, 3, 64), 12240);
}

TEST(KvType, Q8RowsRoundLikeTheReferenceQuantizer) {
  // Group 0: max 2.54 -> scale 0.02 (as fp16), values round(x / scale);
  // group 1 (short, 8 values): all zero -> scale 0, values 0.
  std::vector<float> x(40, 0.0f);
  for (int i = 0; i < 32; ++i) x[i] = 0.0791f * static_cast<float>(i - 16);
  x[5] = 2.54f;
  std::vector<unsigned char> row(static_cast<size_t>(kv_row_bytes(KvType::q8_0, 40)));
  kv_quantize_row(KvType::q8_0, x.data(), row.data(), 40);
  const auto* qs = reinterpret_cast<const int8_t*>(row.data());
  EXPECT_EQ(qs[5], 127);
  const float scale = 2.54f / 127.0f;
  for (int i = 0; i < 32; ++i) EXPECT_EQ(qs[i], static_cast<int8_t>(std::lround(x[i] / scale))) << i;
  for (int i = 32; i < 40; ++i) EXPECT_EQ(qs[i], 0);
  std::vector<float> back(40);
  kv_dequantize_row(KvType::q8_0, row.data(), back.data(), 40);
  for (int i = 0; i < 40; ++i) EXPECT_NEAR(back[i], x[i], scale * 0.5f + 2.54f * 1e-3f) << i;
}

TEST(KvType, HalfTypesRoundToNearest) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> x(64);
  for (float& v : x) v = u(rng);
  for (KvType t : {KvType::f16, KvType::bf16}) {
    std::vector<unsigned char> row(static_cast<size_t>(kv_row_bytes(t, 64)));
    std::vector<float> back(64);
    kv_quantize_row(t, x.data(), row.data(), 64);
    kv_dequantize_row(t, row.data(), back.data(), 64);
    const float rel = t == KvType::f16 ? 1.0f / 2048.0f : 1.0f / 256.0f;  // half an ulp
    for (int i = 0; i < 64; ++i) EXPECT_LE(std::abs(back[i] - x[i]), std::abs(x[i]) * rel) << kv_type_name(t);
  }
}

TEST(KvType, ByteSizes) {
  EXPECT_EQ(parse_byte_size("2GiB"), int64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("1.5G"), 1500000000);
  EXPECT_EQ(parse_byte_size("4096"), 4096);
  for (const char* bad : {"", "GiB", "-1GiB", "2 parsecs", "0", "1e3"}) {
    EXPECT_THROW(parse_byte_size(bad), Error) << bad;
  }
}

}  // namespace
}  // namespace troupe
