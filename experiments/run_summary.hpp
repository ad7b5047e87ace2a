// One load run reduced to what a latency experiment compares: TTFT,
// inter-token, end-to-end and queue latency at P50/P90/P99/max, throughput,
// and the engine's counters (preemptions, KV peak, prefix-cache hits,
// anomalies, the busiest actor). Rows of a sweep's CSV and Markdown tables.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "experiments/request_record.hpp"
#include "telemetry/percentiles.hpp"

namespace troupe {

// What the engine said about the run (in-process: Pipeline; server: /metrics deltas).
struct EngineCounters {
  uint64_t preemptions = 0;
  int32_t kv_peak_blocks = 0;
  int32_t kv_total_blocks = 0;
  double prefix_hit_rate = 0;
  std::map<std::string, uint64_t> anomalies;  // metric -> flagged count
  std::string bottleneck;                     // busiest actor, when traced
  double bottleneck_busy = 0;                 // its busy fraction
};

struct RunSummary {
  std::string topology;
  std::string workload;
  std::string setting;   // other varied settings, "key=value;..."
  double rate = 0;       // offered requests/s (0: closed loop or trace)
  int32_t clients = 0;   // closed-loop clients (0: open loop)
  int32_t requests = 0;
  int32_t ok = 0;
  double duration_s = 0;  // first request sent -> last one ended
  double req_per_s = 0;
  double output_tok_per_s = 0;
  double total_tok_per_s = 0;  // prompt + output tokens
  Quantiles ttft;   // seconds
  Quantiles itl;
  Quantiles e2e;
  Quantiles queue;
  EngineCounters engine;
  std::vector<std::string> errors;  // the first few failed requests' errors
};

RunSummary summarize_run(const std::vector<RequestRecord>& records);

// CSV with a header row (latencies in milliseconds), and a Markdown table.
std::string csv_header();
std::string csv_row(const RunSummary& s);
std::string markdown_table(const std::vector<RunSummary>& runs);

}  // namespace troupe
