// Percentile arithmetic (see percentiles.hpp).
#include "telemetry/percentiles.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace troupe {

double percentile_sorted(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  p = std::clamp(p, 0.0, 100.0);
  // Rank in [0, n-1]; the value between the two closest ranks.
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Quantiles quantiles(std::vector<double> samples) {
  Quantiles q;
  if (samples.empty()) return q;
  std::sort(samples.begin(), samples.end());
  q.count = static_cast<int64_t>(samples.size());
  q.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
  q.p50 = percentile_sorted(samples, 50);
  q.p90 = percentile_sorted(samples, 90);
  q.p99 = percentile_sorted(samples, 99);
  q.max = samples.back();
  return q;
}

}  // namespace troupe
