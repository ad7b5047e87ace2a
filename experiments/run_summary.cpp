// Records -> RunSummary, and its CSV / Markdown forms (see run_summary.hpp).
#include "experiments/run_summary.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace troupe {

RunSummary summarize_run(const std::vector<RequestRecord>& records) {
  RunSummary s;
  s.requests = static_cast<int32_t>(records.size());
  std::vector<double> ttft, itl, e2e, queue;
  double begin = std::numeric_limits<double>::max();
  double end = 0;
  int64_t out_tokens = 0;
  int64_t all_tokens = 0;
  for (const RequestRecord& r : records) {
    begin = std::min(begin, r.sent_s);
    end = std::max(end, r.end_s);
    if (!r.ok) {
      if (s.errors.size() < 5) s.errors.push_back("request " + std::to_string(r.index) + ": " + r.error);
      continue;
    }
    ++s.ok;
    out_tokens += r.output_tokens;
    all_tokens += r.output_tokens + r.prompt_tokens;
    if (r.first_token_s >= 0) ttft.push_back(r.first_token_s - r.sent_s);
    for (size_t k = 1; k < r.token_s.size(); ++k) itl.push_back(r.token_s[k] - r.token_s[k - 1]);
    e2e.push_back(r.end_s - r.sent_s);
    if (r.queue_s >= 0) queue.push_back(r.queue_s);
  }
  s.duration_s = records.empty() ? 0 : std::max(end - begin, 1e-9);
  if (s.duration_s > 0) {
    s.req_per_s = s.ok / s.duration_s;
    s.output_tok_per_s = static_cast<double>(out_tokens) / s.duration_s;
    s.total_tok_per_s = static_cast<double>(all_tokens) / s.duration_s;
  }
  s.ttft = quantiles(std::move(ttft));
  s.itl = quantiles(std::move(itl));
  s.e2e = quantiles(std::move(e2e));
  s.queue = quantiles(std::move(queue));
  return s;
}

namespace {

std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string out = "\"";
  for (const char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string num(double v, int precision = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

std::string ms(const Quantiles& q) {
  return num(q.p50 * 1e3) + "," + num(q.p90 * 1e3) + "," + num(q.p99 * 1e3) + "," + num(q.max * 1e3);
}

uint64_t anomalies(const EngineCounters& e, const char* metric) {
  const auto it = e.anomalies.find(metric);
  return it == e.anomalies.end() ? 0 : it->second;
}

}  // namespace

std::string csv_header() {
  return "topology,workload,setting,rate,clients,requests,ok,duration_s,req_per_s,output_tok_per_s,"
         "total_tok_per_s,ttft_p50_ms,ttft_p90_ms,ttft_p99_ms,ttft_max_ms,itl_p50_ms,itl_p90_ms,itl_p99_ms,"
         "itl_max_ms,e2e_p50_ms,e2e_p90_ms,e2e_p99_ms,e2e_max_ms,queue_p50_ms,queue_p90_ms,queue_p99_ms,"
         "queue_max_ms,preemptions,kv_peak_blocks,kv_total_blocks,prefix_hit_rate,anomalies_ttft,"
         "anomalies_step_time,bottleneck,"
         "bottleneck_busy\n";
}

std::string csv_row(const RunSummary& s) {
  return csv_field(s.topology) + "," + csv_field(s.workload) + "," + csv_field(s.setting) + "," +
         (s.rate > 0 ? num(s.rate) : "") + "," + (s.clients > 0 ? std::to_string(s.clients) : "") + "," +
         std::to_string(s.requests) + "," + std::to_string(s.ok) + "," + num(s.duration_s) + "," +
         num(s.req_per_s) + "," + num(s.output_tok_per_s, 1) + "," + num(s.total_tok_per_s, 1) + "," + ms(s.ttft) +
         "," + ms(s.itl) + "," + ms(s.e2e) + "," + ms(s.queue) + "," + std::to_string(s.engine.preemptions) + "," +
         std::to_string(s.engine.kv_peak_blocks) + "," + std::to_string(s.engine.kv_total_blocks) + "," +
         num(s.engine.prefix_hit_rate) + "," + std::to_string(anomalies(s.engine, "ttft")) + "," +
         std::to_string(anomalies(s.engine, "step_time")) + "," + csv_field(s.engine.bottleneck) + "," +
         num(s.engine.bottleneck_busy) + "\n";
}

std::string markdown_table(const std::vector<RunSummary>& runs) {
  std::string out =
      "| topology | setting | load | ok | req/s | out tok/s | TTFT P50 / P99 (ms) | ITL P50 / P99 (ms) | "
      "E2E P50 / P99 (ms) | queue P99 (ms) | preempt | KV peak | prefix hit | anomalies TTFT / step | bottleneck |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const RunSummary& s : runs) {
    const std::string load = s.clients > 0 ? std::to_string(s.clients) + " clients"
                                           : (s.rate > 0 ? num(s.rate, 2) + " req/s" : "trace");
    const std::string bottleneck =
        s.engine.bottleneck.empty() ? "" : s.engine.bottleneck + " (" + num(100 * s.engine.bottleneck_busy, 0) + "%)";
    out += "| " + s.topology + " | " + s.setting + " | " + load + " | " + std::to_string(s.ok) + "/" +
           std::to_string(s.requests) + " | " + num(s.req_per_s, 2) + " | " + num(s.output_tok_per_s, 1) + " | " +
           num(s.ttft.p50 * 1e3, 1) + " / " + num(s.ttft.p99 * 1e3, 1) + " | " + num(s.itl.p50 * 1e3, 1) + " / " +
           num(s.itl.p99 * 1e3, 1) + " | " + num(s.e2e.p50 * 1e3, 0) + " / " + num(s.e2e.p99 * 1e3, 0) + " | " +
           num(s.queue.p99 * 1e3, 1) + " | " + std::to_string(s.engine.preemptions) + " | " +
           std::to_string(s.engine.kv_peak_blocks) + "/" + std::to_string(s.engine.kv_total_blocks) + " | " +
           num(100 * s.engine.prefix_hit_rate, 0) + "% | " + std::to_string(anomalies(s.engine, "ttft")) + " / " +
           std::to_string(anomalies(s.engine, "step_time")) + " | " + bottleneck + " |\n";
  }
  return out;
}

}  // namespace troupe
