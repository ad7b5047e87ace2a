// Percentiles of latency samples: linear interpolation between closest
// ranks (numpy's default "linear" method), so results can be checked
// against numpy on the same data.
#pragma once

#include <cstdint>
#include <vector>

namespace troupe {

// p in [0, 100]; `sorted` ascending and non-empty.
double percentile_sorted(const std::vector<double>& sorted, double p);

struct Quantiles {
  int64_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

// All zero for no samples.
Quantiles quantiles(std::vector<double> samples);

}  // namespace troupe
