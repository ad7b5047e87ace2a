// EWMA baselines and the anomaly monitor (see anomaly.hpp).
#include "telemetry/anomaly.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace troupe {

EwmaDetector::Verdict EwmaDetector::observe(double x) {
  Verdict v{.baseline = mean_, .deviation = dev_};
  if (n_ == 0) {
    mean_ = x;
    n_ = 1;
    return v;
  }
  const double limit = mean_ + options_.threshold * dev_;
  v.anomaly = n_ >= options_.warmup && x > limit && x > options_.min_ratio * mean_ &&
              x - mean_ >= options_.min_excess_s;
  // Warm-up averages plainly (a good baseline fast); later samples weigh
  // alpha. An excursion enters the baseline clipped at the limit, so one
  // huge outlier does not mask the next few.
  const double w = std::max(options_.alpha, 1.0 / static_cast<double>(n_ + 1));
  const double used = n_ >= options_.warmup ? std::min(x, limit) : x;
  dev_ += w * (std::fabs(used - mean_) - dev_);
  mean_ += w * (used - mean_);
  ++n_;
  return v;
}

namespace {

int32_t log2_bucket(int64_t size) {
  int32_t b = 0;
  while (size > 1) {
    size >>= 1;
    ++b;
  }
  return b;
}

}  // namespace

EwmaDetector::Verdict BucketedDetector::observe(int32_t kind, int64_t size, double x) {
  const auto key = std::make_pair(kind, log2_bucket(size));
  auto it = detectors_.find(key);
  if (it == detectors_.end()) it = detectors_.emplace(key, EwmaDetector(options_)).first;
  return it->second.observe(x);
}

std::string BucketedDetector::bucket_name(const char* kind, int64_t size) {
  const int32_t b = log2_bucket(size);
  const int64_t lo = b == 0 ? 0 : int64_t{1} << b;
  const int64_t hi = (int64_t{1} << (b + 1)) - 1;
  return std::string(kind) + ", " + std::to_string(lo) + "-" + std::to_string(hi) + " tokens";
}

AnomalyMonitor::AnomalyMonitor(Sink sink, size_t keep) : sink_(std::move(sink)), keep_(std::max<size_t>(keep, 1)) {}

void AnomalyMonitor::report(AnomalyEvent e) {
  {
    std::lock_guard lock(mu_);
    ++counts_[e.metric];
    recent_.push_back(e);
    while (recent_.size() > keep_) recent_.pop_front();
  }
  if (sink_) sink_(e);
}

uint64_t AnomalyMonitor::count(const std::string& metric) const {
  std::lock_guard lock(mu_);
  const auto it = counts_.find(metric);
  return it == counts_.end() ? 0 : it->second;
}

std::map<std::string, uint64_t> AnomalyMonitor::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

std::vector<AnomalyEvent> AnomalyMonitor::recent() const {
  std::lock_guard lock(mu_);
  return {recent_.begin(), recent_.end()};
}

std::string describe(const AnomalyEvent& e) {
  char head[160];
  std::snprintf(head, sizeof head, "anomaly: %s %.2f ms (baseline %.2f ms, deviation %.2f ms)", e.metric.c_str(),
                e.value_s * 1e3, e.baseline_s * 1e3, e.deviation_s * 1e3);
  std::string out = head;
  if (!e.detail.empty()) out += " [" + e.detail + "]";
  if (e.step != ~uint64_t{0}) out += " step " + std::to_string(e.engine) + ":" + std::to_string(e.step);
  out += " requests";
  const size_t shown = std::min<size_t>(e.requests.size(), 16);
  for (size_t i = 0; i < shown; ++i) {
    out += i ? ',' : ' ';
    out += std::to_string(e.requests[i]);
  }
  if (e.requests.size() > shown) out += ",... (" + std::to_string(e.requests.size()) + ")";
  return out;
}

}  // namespace troupe
