// Random draws that come out the same on every machine for a seed: the
// standard's distributions (std::normal_distribution, ...) may differ between
// standard libraries, so workloads derive every draw from std::mt19937_64,
// whose output the standard fixes, with the formulas written out here.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace troupe {

// One step of splitmix64: turns (seed, stream, index) into well-spread
// mt19937_64 seeds, so neighbouring seeds or indices give unrelated streams.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class SeededRandom {
 public:
  // stream and index name independent sequences of one seed (a workload
  // draws arrivals, prefixes and each request from its own).
  explicit SeededRandom(uint64_t seed, uint64_t stream = 0, uint64_t index = 0)
      : engine_(splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ index)) {}

  uint64_t bits() { return engine_(); }

  // [0, 1) from the top 53 bits: every value is an exact double.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  // An integer in [0, n), n >= 1. The bias of scaling a 53-bit fraction is
  // below 2^-30 for any n a workload uses.
  int64_t below(int64_t n) {
    const auto i = static_cast<int64_t>(uniform() * static_cast<double>(n));
    return i < n ? i : n - 1;
  }

  // Gap of a Poisson process of this rate (per second): -ln(1 - u) / rate,
  // with 1 - u in (0, 1] so the log is finite.
  double exponential(double rate) { return -std::log1p(-uniform()) / rate; }

  // Standard normal by Box-Muller; one of the pair is used, so a request
  // always takes exactly two draws whatever came before it.
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace troupe
