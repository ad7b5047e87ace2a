// k-quants (q2_K, q3_K, q4_K, q5_K, q6_K), iq4_nl, iq4_xs and mxfp4 against the `gguf`
// package: super-blocks of random bytes (tests/fixtures/kquant_blocks.json, made by
// tools/fixtures/make_kquant_fixtures.py) must dequantize to gguf's values bit
// for bit, and matmul over them on every SIMD path must match the product
// numpy computed in float64 from those values. Then Troupe's own k-quant
// quantizer: its error must sit between the formats with fewer and more bits.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/thread_pool.hpp"
#include "isa_paths.hpp"
#include "kernels/cpu_kernels.hpp"
#include "tests/exact_math.hpp"

namespace troupe {
namespace {

std::vector<uint8_t> from_hex(const std::string& s) {
  std::vector<uint8_t> out(s.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return out;
}

const nlohmann::json& fixture() {
  static const nlohmann::json j = [] {
    std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/kquant_blocks.json");
    if (!in) throw std::runtime_error("missing fixture kquant_blocks.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

// The fixture's keys are gguf's lower-case names (q4_k); Troupe's are ggml's.
std::string fixture_key(DType t) {
  std::string k(dtype_name(t));
  for (char& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return k;
}

class KQuant : public testing::TestWithParam<DType> {};

TEST_P(KQuant, DequantizesLikeGguf) {
  const DType t = GetParam();
  const auto& f = fixture()["types"][fixture_key(t)];
  const int64_t n_in = f["n_in"].get<int64_t>();
  ASSERT_EQ(n_in % kQK_K, 0);
  for (size_t r = 0; r < f["rows"].size(); ++r) {
    const std::vector<uint8_t> bytes = from_hex(f["rows"][r].get<std::string>());
    ASSERT_EQ(static_cast<int64_t>(bytes.size()), row_bytes(t, n_in));
    const std::vector<float> want = f["dequant"][r].get<std::vector<float>>();
    std::vector<float> got(static_cast<size_t>(n_in));
    dequantize_row(t, bytes.data(), got.data(), n_in);
    for (int64_t i = 0; i < n_in; ++i) {
      ASSERT_EQ(got[i], want[i]) << dtype_name(t) << " row " << r << " element " << i;
    }
  }
}

// Every token is the fixture's x, so every output row must equal numpy's
// y[r]; the bound is matmul_test's (f32 accumulation over exact weights):
// 1e-5 * sum_i |w_i x_i|.
TEST_P(KQuant, MatmulMatchesNumpyOnEveryIsa) {
  const test::ExactMath exact;  // a reference to float rounding
  const DType t = GetParam();
  const auto& f = fixture()["types"][fixture_key(t)];
  const int64_t n_in = f["n_in"].get<int64_t>();
  const int64_t n_out = static_cast<int64_t>(f["rows"].size());
  std::vector<uint8_t> w;
  std::vector<double> scale(static_cast<size_t>(n_out));
  const std::vector<float> x1 = f["x"].get<std::vector<float>>();
  const std::vector<double> want = f["y"].get<std::vector<double>>();
  for (int64_t r = 0; r < n_out; ++r) {
    const std::vector<uint8_t> row = from_hex(f["rows"][r].get<std::string>());
    w.insert(w.end(), row.begin(), row.end());
    const std::vector<float> deq = f["dequant"][r].get<std::vector<float>>();
    for (int64_t i = 0; i < n_in; ++i) scale[r] += std::abs(double(deq[i]) * x1[i]);
  }
  ThreadPool pool(2);
  for (int64_t n_tokens : {1, 5, 20}) {  // GEMV (one and several tokens) and GEMM
    std::vector<float> x;
    for (int64_t k = 0; k < n_tokens; ++k) x.insert(x.end(), x1.begin(), x1.end());
    for (Isa isa : test::runnable_isas()) {
      test::ForcedIsa forced(isa);
      std::vector<float> y(static_cast<size_t>(n_tokens * n_out), std::nanf(""));
      kernels::matmul(y.data(), x.data(), w.data(), t, n_tokens, n_in, n_out, pool);
      for (int64_t k = 0; k < n_tokens; ++k) {
        for (int64_t r = 0; r < n_out; ++r) {
          EXPECT_LE(std::abs(double(y[k * n_out + r]) - want[r]), 1e-5 * scale[r])
              << dtype_name(t) << " " << isa_name(isa) << " n_tokens " << n_tokens << " token " << k << " row " << r
              << ": got " << y[k * n_out + r] << ", want " << want[r];
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, KQuant,
                         testing::Values(DType::q2_K, DType::q3_K, DType::q4_K, DType::q5_K, DType::q6_K,
                                         DType::iq4_nl, DType::iq4_xs, DType::mxfp4),
                         [](const testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

// RMS error of dequantize(quantize(x)) over rows of Gaussian weights, relative
// to their RMS.
double relative_rms_error(DType t, const std::vector<float>& x, int64_t n_in) {
  const int64_t n_rows = static_cast<int64_t>(x.size()) / n_in;
  std::vector<uint8_t> q(static_cast<size_t>(row_bytes(t, n_in)));
  std::vector<float> back(static_cast<size_t>(n_in));
  double err = 0, norm = 0;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* row = x.data() + r * n_in;
    quantize_row(t, row, q.data(), n_in);
    dequantize_row(t, q.data(), back.data(), n_in);
    for (int64_t i = 0; i < n_in; ++i) {
      err += (double(back[i]) - row[i]) * (double(back[i]) - row[i]);
      norm += double(row[i]) * row[i];
    }
  }
  return std::sqrt(err / norm);
}

// Bits per weight: q2_K 2.63, q3_K 3.44, q4_0 4.5, q4_K 4.5, q5_K 5.5, q6_K
// 6.56, q8_0 8.5. Each extra bit should roughly halve the error of a uniform
// quantizer; a k-quant must also beat q4_0 at the same size (its
// per-sub-block minimum and the fitted scales are the point of the format).
// Measured values (2^14 weights, this seed): q2_K 0.27, q3_K 0.15, q4_0 0.085,
// q4_K 0.072, q5_K 0.036, q6_K 0.018, q8_0 0.0053.
TEST(KQuantQuantize, ErrorFallsWithEveryBit) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  const int64_t n_in = 1024;
  std::vector<float> x(16 * n_in);
  for (float& v : x) v = dist(rng);
  const double e_q2_k = relative_rms_error(DType::q2_K, x, n_in);
  const double e_q3_k = relative_rms_error(DType::q3_K, x, n_in);
  const double e_q4_0 = relative_rms_error(DType::q4_0, x, n_in);
  const double e_q4_k = relative_rms_error(DType::q4_K, x, n_in);
  const double e_q5_k = relative_rms_error(DType::q5_K, x, n_in);
  const double e_q6_k = relative_rms_error(DType::q6_K, x, n_in);
  const double e_q8_0 = relative_rms_error(DType::q8_0, x, n_in);
  EXPECT_LT(e_q3_k, 0.7 * e_q2_k);
  EXPECT_LT(e_q4_k, 0.7 * e_q3_k);
  EXPECT_LT(e_q4_k, e_q4_0);
  EXPECT_LT(e_q5_k, 0.6 * e_q4_k);
  EXPECT_LT(e_q6_k, 0.6 * e_q5_k);
  EXPECT_LT(e_q8_0, e_q6_k);
  EXPECT_GT(e_q6_k, 0.0);
  std::printf("relative RMS error: q2_K %.4f q3_K %.4f q4_0 %.4f q4_K %.4f q5_K %.4f q6_K %.4f q8_0 %.4f\n", e_q2_k,
              e_q3_k, e_q4_0, e_q4_k, e_q5_k, e_q6_k, e_q8_0);
}

// Rows that are all zero, constant, or have one outlier quantize to finite
// values, zeros exactly.
TEST(KQuantQuantize, EdgeRows) {
  for (DType t : {DType::q2_K, DType::q3_K, DType::q4_K, DType::q5_K, DType::q6_K}) {
    std::vector<float> zero(256, 0.0f), constant(256, 0.75f), spike(256, 0.001f);
    spike[77] = -40.0f;
    for (const auto* x : {&zero, &constant, &spike}) {
      std::vector<uint8_t> q(static_cast<size_t>(row_bytes(t, 256)));
      std::vector<float> back(256);
      quantize_row(t, x->data(), q.data(), 256);
      dequantize_row(t, q.data(), back.data(), 256);
      for (int i = 0; i < 256; ++i) {
        ASSERT_TRUE(std::isfinite(back[i])) << dtype_name(t) << " element " << i;
        if ((*x)[i] == 0.0f) {
          EXPECT_EQ(back[i], 0.0f) << dtype_name(t) << " element " << i;
        }
      }
      // The outlier is the largest weight of its sub-block: kept to within
      // fp16 precision of the super-scale and one quantization step.
      if (x == &spike) {
        EXPECT_NEAR(back[77], -40.0f, 40.0f * 0.02f) << dtype_name(t);
      }
      if (x == &constant) {
        EXPECT_NEAR(back[5], 0.75f, 0.75f * 0.02f) << dtype_name(t);
      }
    }
  }
}

}  // namespace
}  // namespace troupe
