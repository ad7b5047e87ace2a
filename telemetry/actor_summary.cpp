// Per-actor busy fraction, mailbox wait and message rate (see actor_summary.hpp).
#include "telemetry/actor_summary.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "telemetry/percentiles.hpp"

namespace troupe {

TraceSummary summarize_trace(const std::vector<TrackData>& tracks) {
  // The window starts where every wrapped track still has spans, so busy
  // fractions compare actors over the same stretch of time.
  int64_t begin = std::numeric_limits<int64_t>::max();
  int64_t end = std::numeric_limits<int64_t>::min();
  int64_t wrapped_begin = std::numeric_limits<int64_t>::min();
  for (const TrackData& t : tracks) {
    if (t.spans.empty()) continue;
    begin = std::min(begin, t.spans.front().start_ns);
    for (const Span& s : t.spans) end = std::max(end, s.end_ns);
    if (t.wrapped) wrapped_begin = std::max(wrapped_begin, t.spans.front().start_ns);
  }
  TraceSummary out;
  if (end < begin) {
    for (const TrackData& t : tracks) out.actors.push_back({.actor = t.name});
    return out;
  }
  begin = std::max(begin, wrapped_begin);
  const double window_s = static_cast<double>(std::max<int64_t>(end - begin, 1)) * 1e-9;
  out.window_s = window_s;
  double busiest = -1;
  for (const TrackData& t : tracks) {
    ActorSummary a{.actor = t.name};
    std::vector<double> waits, handles;
    int64_t busy_ns = 0;
    for (const Span& s : t.spans) {
      if (s.start_ns < begin) continue;
      ++a.messages;
      busy_ns += s.end_ns - s.start_ns;
      handles.push_back(static_cast<double>(s.end_ns - s.start_ns) * 1e-3);
      if (s.enqueue_ns > 0) waits.push_back(static_cast<double>(std::max<int64_t>(0, s.start_ns - s.enqueue_ns)) * 1e-3);
    }
    a.busy_fraction = static_cast<double>(busy_ns) * 1e-9 / window_s;
    a.messages_per_s = static_cast<double>(a.messages) / window_s;
    const Quantiles w = quantiles(std::move(waits));
    const Quantiles h = quantiles(std::move(handles));
    a.wait_p50_us = w.p50;
    a.wait_p99_us = w.p99;
    a.handle_p50_us = h.p50;
    a.handle_p99_us = h.p99;
    if (a.messages > 0 && a.busy_fraction > busiest) {
      busiest = a.busy_fraction;
      out.bottleneck = a.actor;
    }
    out.actors.push_back(std::move(a));
  }
  return out;
}

std::string format_trace_summary(const TraceSummary& summary) {
  std::string out =
      "| actor | messages | msg/s | busy | mailbox wait P50 (us) | P99 (us) | handler P50 (us) | P99 (us) |\n"
      "|---|---|---|---|---|---|---|---|\n";
  char line[256];
  for (const ActorSummary& a : summary.actors) {
    std::snprintf(line, sizeof line, "| %s%s | %llu | %.1f | %.1f%% | %.1f | %.1f | %.1f | %.1f |\n",
                  a.actor.c_str(), a.actor == summary.bottleneck ? " (bottleneck)" : "",
                  static_cast<unsigned long long>(a.messages), a.messages_per_s, 100.0 * a.busy_fraction,
                  a.wait_p50_us, a.wait_p99_us, a.handle_p50_us, a.handle_p99_us);
    out += line;
  }
  return out;
}

}  // namespace troupe
