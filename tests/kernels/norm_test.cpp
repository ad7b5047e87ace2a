// RMSNorm and LayerNorm against plain double-precision references, on every
// SIMD path this CPU runs. Tolerance: 1e-5 absolute + 1e-5 relative (f32
// sums over up to 4099 values).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "isa_paths.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe {
namespace {

constexpr double kTol = 1e-5;

std::vector<double> ref_rmsnorm(const std::vector<float>& x, const std::vector<float>& w, int64_t n_tokens,
                                int64_t n_embd, double eps) {
  std::vector<double> y(x.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < n_embd; ++i) ss += double(x[t * n_embd + i]) * x[t * n_embd + i];
    const double r = 1.0 / std::sqrt(ss / n_embd + eps);
    for (int64_t i = 0; i < n_embd; ++i) y[t * n_embd + i] = x[t * n_embd + i] * r * w[i];
  }
  return y;
}

std::vector<double> ref_layernorm(const std::vector<float>& x, const std::vector<float>& w, const float* b,
                                  int64_t n_tokens, int64_t n_embd, double eps) {
  std::vector<double> y(x.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    double mean = 0;
    for (int64_t i = 0; i < n_embd; ++i) mean += x[t * n_embd + i];
    mean /= n_embd;
    double var = 0;
    for (int64_t i = 0; i < n_embd; ++i) var += (x[t * n_embd + i] - mean) * (x[t * n_embd + i] - mean);
    var /= n_embd;
    for (int64_t i = 0; i < n_embd; ++i) {
      y[t * n_embd + i] = (x[t * n_embd + i] - mean) / std::sqrt(var + eps) * w[i] + (b ? b[i] : 0.0);
    }
  }
  return y;
}

TEST(Norm, RmsnormMatchesReferenceOnEveryIsa) {
  std::mt19937 rng(7);
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (int64_t n_embd : {1, 7, 8, 16, 17, 64, 100, 4099}) {
      const int64_t n_tokens = 3;
      auto x = test::random_floats(rng, n_tokens * n_embd, -3.0f, 3.0f);
      auto w = test::random_floats(rng, n_embd, 0.5f, 1.5f);
      const auto want = ref_rmsnorm(x, w, n_tokens, n_embd, 1e-6);
      std::vector<float> y(x.size());
      kernels::rmsnorm(y.data(), x.data(), w.data(), n_tokens, n_embd, 1e-6f);
      for (size_t i = 0; i < y.size(); ++i) {
        ASSERT_TRUE(test::close(y[i], want[i], kTol, kTol))
            << isa_name(isa) << " n_embd=" << n_embd << " i=" << i << " got " << y[i] << " want " << want[i];
      }
      // In place (y aliases x) gives the same values.
      kernels::rmsnorm(x.data(), x.data(), w.data(), n_tokens, n_embd, 1e-6f);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(x[i], y[i]) << isa_name(isa) << " in place, i=" << i;
    }
  }
}

TEST(Norm, RmsnormEpsDominatesTinyRows) {
  // A zero row stays zero; a tiny row is scaled by 1/sqrt(eps), not blown up.
  std::vector<float> x = {0, 0, 0, 0, 1e-4f, -1e-4f, 1e-4f, -1e-4f};
  std::vector<float> w(4, 1.0f);
  std::vector<float> y(8);
  kernels::rmsnorm(y.data(), x.data(), w.data(), 2, 4, 1e-2f);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], 0.0f);
  const double want = 1e-4 / std::sqrt(1e-8 + 1e-2);
  for (int i = 4; i < 8; ++i) EXPECT_NEAR(std::abs(y[i]), want, 1e-9);
}

TEST(Norm, LayernormMatchesReferenceOnEveryIsa) {
  std::mt19937 rng(11);
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (int64_t n_embd : {1, 5, 8, 16, 31, 768, 1027}) {
      const int64_t n_tokens = 2;
      // An offset mean checks the two-pass variance.
      auto x = test::random_floats(rng, n_tokens * n_embd, 9.0f, 11.0f);
      auto w = test::random_floats(rng, n_embd, -1.5f, 1.5f);
      auto b = test::random_floats(rng, n_embd, -0.5f, 0.5f);
      for (const float* bias : {static_cast<const float*>(b.data()), static_cast<const float*>(nullptr)}) {
        const auto want = ref_layernorm(x, w, bias, n_tokens, n_embd, 1e-5);
        std::vector<float> y(x.size());
        kernels::layernorm(y.data(), x.data(), w.data(), bias, n_tokens, n_embd, 1e-5f);
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_TRUE(test::close(y[i], want[i], kTol, kTol))
              << isa_name(isa) << " n_embd=" << n_embd << " bias=" << (bias != nullptr) << " i=" << i << " got "
              << y[i] << " want " << want[i];
        }
      }
    }
  }
}

TEST(Norm, LayernormOfKnownRow) {
  // x = [1, 2, 3, 4]: mean 2.5, var 1.25.
  const std::vector<float> x = {1, 2, 3, 4};
  const std::vector<float> w = {1, 1, 2, 2};
  const std::vector<float> b = {0, 1, 0, 1};
  std::vector<float> y(4);
  kernels::layernorm(y.data(), x.data(), w.data(), b.data(), 1, 4, 0.0f);
  const double s = 1.0 / std::sqrt(1.25);
  EXPECT_NEAR(y[0], -1.5 * s, 1e-6);
  EXPECT_NEAR(y[1], -0.5 * s + 1, 1e-6);
  EXPECT_NEAR(y[2], 0.5 * s * 2, 1e-6);
  EXPECT_NEAR(y[3], 1.5 * s * 2 + 1, 1e-6);
}

TEST(Norm, RejectsBadShapes) {
  std::vector<float> x(4), w(4);
  EXPECT_THROW(kernels::rmsnorm(x.data(), x.data(), w.data(), 1, 0, 1e-5f), Error);
  EXPECT_THROW(kernels::layernorm(x.data(), x.data(), nullptr, nullptr, 1, 4, 1e-5f), Error);
}

}  // namespace
}  // namespace troupe
