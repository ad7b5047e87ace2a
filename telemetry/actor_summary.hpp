// Where the time went, per actor, from a trace: the fraction of the window
// each actor was busy, how long its messages waited in its mailbox (P50,
// P99), and messages handled per second. The busiest actor is named the
// bottleneck: in a pipeline the stage that is busy all the time sets the pace.
#pragma once

#include <string>
#include <vector>

#include "telemetry/chrome_trace.hpp"

namespace troupe {

struct ActorSummary {
  std::string actor;
  uint64_t messages = 0;
  double busy_fraction = 0;  // of the window
  double messages_per_s = 0;
  double wait_p50_us = 0;    // mailbox wait: enqueued -> taken out
  double wait_p99_us = 0;
  double handle_p50_us = 0;  // handler time per message
  double handle_p99_us = 0;
};

struct TraceSummary {
  double window_s = 0;  // the span of time every track still covers
  std::vector<ActorSummary> actors;  // in track order
  std::string bottleneck;            // the busiest actor; empty without spans
};

TraceSummary summarize_trace(const std::vector<TrackData>& tracks);

// A Markdown table of the summary, the bottleneck marked.
std::string format_trace_summary(const TraceSummary& summary);

}  // namespace troupe
