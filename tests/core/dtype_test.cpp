// Half/bfloat16 conversion and GGUF block quantization, checked bit for bit
// against the `gguf` Python package (tests/fixtures/quant_blocks.json, made by
// tools/fixtures/make_quant_fixtures.py).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace troupe {
namespace {

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

TEST(Half, KnownValues) {
  EXPECT_EQ(f32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_fp16(65504.0f), 0x7bff);        // largest finite half
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);        // rounds to infinity
  EXPECT_EQ(f32_to_fp16(5.9604645e-8f), 0x0001);   // smallest subnormal
  EXPECT_EQ(f32_to_fp16(1.0009765625f), 0x3c01);   // 1 + 2^-10 exactly
  EXPECT_EQ(f32_to_fp16(1.00048828125f), 0x3c00);  // halfway: ties to even (down)
  EXPECT_EQ(f32_to_fp16(1.00146484375f), 0x3c02);  // halfway: ties to even (up)
  EXPECT_FLOAT_EQ(fp16_to_f32(0x3555), 0.333251953125f);
  EXPECT_FLOAT_EQ(fp16_to_f32(0x0001), 5.9604645e-8f);
  EXPECT_TRUE(std::isinf(fp16_to_f32(0xfc00)));
  EXPECT_TRUE(std::isnan(fp16_to_f32(f32_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Half, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_fp16(f), h) << "half bits " << h;
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);  // halfway between 0x3f80 and 0x3f81: even
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);  // halfway between 0x3f81 and 0x3f82: even
  EXPECT_EQ(f32_to_bf16(-3.0f), 0xc040);
}

TEST(DType, RowBytesFollowBlockSizes) {
  EXPECT_EQ(row_bytes(DType::f32, 10), 40);
  EXPECT_EQ(row_bytes(DType::f16, 10), 20);
  EXPECT_EQ(row_bytes(DType::q8_0, 64), 68);
  EXPECT_EQ(row_bytes(DType::q4_0, 64), 36);
  EXPECT_EQ(row_bytes(DType::q4_1, 96), 60);
  EXPECT_THROW(row_bytes(DType::q4_0, 33), Error);
  EXPECT_FALSE(dtype_known(9));  // q8_1: a GGUF type Troupe does not read
  EXPECT_TRUE(dtype_known(30));
}

class QuantFixture : public ::testing::TestWithParam<DType> {};

TEST_P(QuantFixture, MatchesGgufReferenceBitForBit) {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/quant_blocks.json");
  ASSERT_TRUE(in) << "missing fixture quant_blocks.json";
  const auto j = nlohmann::json::parse(in);
  const DType t = GetParam();
  const std::string key(dtype_name(t));
  ASSERT_GE(j["cases"].size(), 10u);
  for (const auto& c : j["cases"]) {
    const std::vector<float> x = c["x"].get<std::vector<float>>();
    const std::vector<uint8_t> want = from_hex(c[key]["bytes"].get<std::string>());
    std::vector<uint8_t> got(static_cast<size_t>(row_bytes(t, static_cast<int64_t>(x.size()))));
    quantize_row(t, x.data(), got.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(got, want) << key << " quantization differs from gguf's";

    // Dequantizing the reference bytes gives exactly gguf's values.
    const std::vector<float> want_dq = c[key]["dequant"].get<std::vector<float>>();
    std::vector<float> dq(x.size());
    dequantize_row(t, want.data(), dq.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(dq[i], want_dq[i]) << key << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Blocks, QuantFixture,
                         ::testing::Values(DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                                           DType::mxfp4),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

TEST(Quant, KnownQ4_0Block) {
  // d = 0.5; nibbles 0..15 in the low halves and 15..0 in the high halves.
  BlockQ4_0 b{};
  b.d = f32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float x[32];
  dequantize_row(DType::q4_0, &b, x, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(x[j], 0.5f * static_cast<float>(j - 8));
    EXPECT_EQ(x[j + 16], 0.5f * static_cast<float>(7 - j));
  }
}

TEST(Quant, KnownQ4_1Block) {
  BlockQ4_1 b{};
  b.d = f32_to_fp16(0.25f);
  b.m = f32_to_fp16(-1.0f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  float x[32];
  dequantize_row(DType::q4_1, &b, x, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(x[j], 0.25f * static_cast<float>(j) - 1.0f);
    EXPECT_EQ(x[j + 16], x[j]);
  }
}

}  // namespace
}  // namespace troupe
