// Test helpers for the CPU kernels: the SIMD paths this CPU can run (each is
// forced in turn and compared with a plain reference) and seeded fills.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "tests/exact_math.hpp"

namespace troupe::test {

inline std::vector<Isa> runnable_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (isa_supported(isa)) out.push_back(isa);
  }
  return out;
}

// Forces a path for one scope, then goes back to the best one.
class ForcedIsa {
 public:
  explicit ForcedIsa(Isa isa) { force_isa(isa); }
  ~ForcedIsa() { force_isa(best_isa()); }
  ForcedIsa(const ForcedIsa&) = delete;
  ForcedIsa& operator=(const ForcedIsa&) = delete;
};

// Forces the 256-bit int8 kernels' dot products for one scope, then the
// default again.
class ForcedDots256 {
 public:
  explicit ForcedDots256(Dots256 d) { force_dots256(d); }
  ~ForcedDots256() { force_dots256(std::nullopt); }
  ForcedDots256(const ForcedDots256&) = delete;
  ForcedDots256& operator=(const ForcedDots256&) = delete;
};

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// |got - want| <= abs_tol + rel_tol * |want|
inline bool close(double got, double want, double abs_tol, double rel_tol) {
  return std::abs(got - want) <= abs_tol + rel_tol * std::abs(want);
}

}  // namespace troupe::test
