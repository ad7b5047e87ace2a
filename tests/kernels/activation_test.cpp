// SwiGLU, tanh-GELU and softmax against double-precision references written
// from their definitions, on every SIMD path this CPU runs. Tolerance: 1e-6
// absolute + 1e-5 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "isa_paths.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe {
namespace {

constexpr double kAbs = 1e-6;
constexpr double kRel = 1e-5;

double ref_silu(double x) { return x / (1.0 + std::exp(-x)); }
double ref_gelu(double x) {
  const double pi = 3.14159265358979323846;
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

// Random values in [-12, 12] and the edges where exp() saturates.
std::vector<float> activation_inputs(std::mt19937& rng, size_t n) {
  auto v = test::random_floats(rng, n, -12.0f, 12.0f);
  const float edges[] = {0.0f, -0.0f, 1e-7f, -1e-7f, 88.5f, -88.5f, 100.0f, -100.0f, 1e4f, -1e4f};
  for (size_t i = 0; i < std::size(edges) && i < n; ++i) v[i * 3 % n] = edges[i];
  return v;
}

TEST(Activation, SwigluMatchesReferenceOnEveryIsa) {
  std::mt19937 rng(3);
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (size_t n : {1u, 3u, 8u, 15u, 16u, 33u, 1000u}) {
      auto g = activation_inputs(rng, n);
      auto u = test::random_floats(rng, n, -2.0f, 2.0f);
      std::vector<float> y(n);
      kernels::swiglu(y.data(), g.data(), u.data(), static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i) {
        const double want = ref_silu(g[i]) * u[i];
        ASSERT_TRUE(test::close(y[i], want, kAbs, kRel))
            << isa_name(isa) << " n=" << n << " g=" << g[i] << " u=" << u[i] << " got " << y[i] << " want " << want;
      }
      // y aliasing gate.
      kernels::swiglu(g.data(), g.data(), u.data(), static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(g[i], y[i]) << isa_name(isa) << " in place, i=" << i;
    }
  }
}

TEST(Activation, GeluMatchesReferenceOnEveryIsa) {
  std::mt19937 rng(5);
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (size_t n : {1u, 7u, 8u, 16u, 17u, 100u, 3072u}) {
      auto x = activation_inputs(rng, n);
      std::vector<float> y(n);
      kernels::gelu(y.data(), x.data(), static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i) {
        const double want = ref_gelu(x[i]);
        ASSERT_TRUE(test::close(y[i], want, kAbs, kRel))
            << isa_name(isa) << " n=" << n << " x=" << x[i] << " got " << y[i] << " want " << want;
      }
      kernels::gelu(x.data(), x.data(), static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(x[i], y[i]) << isa_name(isa) << " in place, i=" << i;
    }
  }
}

TEST(Activation, GeluKnownValues) {
  // gelu_tanh(1) = 0.5 * (1 + tanh(sqrt(2/pi) * 1.044715)) = 0.8411919906...
  const float x[] = {1.0f, -1.0f, 0.0f};
  float y[3];
  kernels::gelu(y, x, 3);
  EXPECT_NEAR(y[0], 0.8411919906, 1e-6);
  EXPECT_NEAR(y[1], -0.1588080094, 1e-6);
  EXPECT_EQ(y[2], 0.0f);
}

std::vector<double> ref_softmax(const std::vector<float>& x) {
  double m = -std::numeric_limits<double>::infinity();
  for (float v : x) m = std::max(m, double(v));
  std::vector<double> y(x.size());
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += y[i] = std::exp(double(x[i]) - m);
  for (double& v : y) v /= s;
  return y;
}

TEST(Activation, SoftmaxMatchesReferenceOnEveryIsa) {
  std::mt19937 rng(9);
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (size_t n : {1u, 2u, 9u, 16u, 31u, 32u, 1000u, 32003u}) {
      for (float spread : {1.0f, 30.0f, 1000.0f}) {
        // Centred on 5e4 for the middle spread: a large common offset must not overflow exp().
        const float centre = spread == 30.0f ? 5e4f : 0.0f;
        auto x = test::random_floats(rng, n, centre - spread, centre + spread);
        const auto want = ref_softmax(x);
        kernels::softmax(x.data(), static_cast<int64_t>(n));
        double total = 0;
        for (size_t i = 0; i < n; ++i) {
          ASSERT_TRUE(test::close(x[i], want[i], kAbs, kRel))
              << isa_name(isa) << " n=" << n << " spread=" << spread << " i=" << i << " got " << x[i] << " want "
              << want[i];
          total += x[i];
        }
        EXPECT_NEAR(total, 1.0, 1e-4) << isa_name(isa) << " n=" << n;
      }
    }
  }
}

TEST(Activation, SoftmaxMaskedEntriesGetZero) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    std::vector<float> x = {0.0f, ninf, 0.0f, ninf, ninf, 0.0f, ninf, 0.0f, ninf, ninf, ninf, ninf, ninf, ninf, ninf,
                            ninf, ninf, 0.0f};
    kernels::softmax(x.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      if (i == 0 || i == 2 || i == 5 || i == 7 || i == 17) {
        EXPECT_FLOAT_EQ(x[i], 0.2f) << isa_name(isa) << " i=" << i;
      } else {
        EXPECT_EQ(x[i], 0.0f) << isa_name(isa) << " i=" << i;
      }
    }
  }
}

}  // namespace
}  // namespace troupe
