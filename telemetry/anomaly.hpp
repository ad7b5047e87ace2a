// Online anomaly flags for latency metrics (TTFT, step time): each metric
// keeps a baseline, an exponentially weighted mean and mean absolute
// deviation, and a sample far above it (threshold deviations, and a
// multiple of the mean so that jitter on a very steady metric is not
// flagged) is an excursion. Flagged events are counted per metric, kept in
// a bounded list and handed to a sink (the server logs them) with the
// request ids involved.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace troupe {

struct AnomalyOptions {
  double alpha = 0.05;     // weight of a new sample in the baseline
  double threshold = 6.0;  // deviations above the mean that make an excursion
  double min_ratio = 2.0;  // ... and at least this multiple of the mean
  int32_t warmup = 16;     // samples seen before anything is flagged
  // ... and at least this far above the mean: a thread waking a
  // millisecond late is scheduling noise, not an excursion worth a log line.
  double min_excess_s = 0.005;
};

class EwmaDetector {
 public:
  explicit EwmaDetector(AnomalyOptions options = {}) : options_(options) {}

  struct Verdict {
    bool anomaly = false;
    double baseline = 0;   // the mean before this sample
    double deviation = 0;  // the mean absolute deviation before it
  };
  Verdict observe(double x);

  int64_t samples() const { return n_; }
  double mean() const { return mean_; }
  double deviation() const { return dev_; }

 private:
  AnomalyOptions options_;
  int64_t n_ = 0;
  double mean_ = 0;
  double dev_ = 0;
};

// One baseline per size class (the power-of-two bucket of a size, and a
// kind): a step with 500 prompt tokens is not an excursion of a decode
// step, nor a long prompt's TTFT one of a short prompt's.
class BucketedDetector {
 public:
  explicit BucketedDetector(AnomalyOptions options = {}) : options_(options) {}

  EwmaDetector::Verdict observe(int32_t kind, int64_t size, double x);
  // "kind, 8-15"
  static std::string bucket_name(const char* kind, int64_t size);

 private:
  AnomalyOptions options_;
  std::map<std::pair<int32_t, int32_t>, EwmaDetector> detectors_;
};

struct AnomalyEvent {
  std::string metric;  // "ttft", "step_time"
  double value_s = 0;
  double baseline_s = 0;
  double deviation_s = 0;
  std::vector<int64_t> requests;  // the requests it concerned
  uint64_t step = ~uint64_t{0};   // step_time: the step and its engine
  int32_t engine = -1;
  std::string detail;             // what the baseline was keyed on (e.g. "decode, 8-15 tokens")
};

// Shared by the actors that detect; thread-safe.
class AnomalyMonitor {
 public:
  using Sink = std::function<void(const AnomalyEvent&)>;
  explicit AnomalyMonitor(Sink sink = {}, size_t keep = 256);

  void report(AnomalyEvent e);
  uint64_t count(const std::string& metric) const;
  std::map<std::string, uint64_t> counts() const;
  std::vector<AnomalyEvent> recent() const;  // oldest first, at most `keep`

 private:
  Sink sink_;
  const size_t keep_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> counts_;
  std::deque<AnomalyEvent> recent_;
};

// A one-line description of an event, for logs.
std::string describe(const AnomalyEvent& e);

}  // namespace troupe
