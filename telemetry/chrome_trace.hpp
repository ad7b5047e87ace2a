// Traces in the Chrome trace-event JSON format, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: one track (thread) per
// actor, a complete event ("X") per handled message, and one flow per
// request linking, in time order, every span that carried its id.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "telemetry/trace_ring.hpp"

namespace troupe {

struct TrackData {
  std::string name;
  std::vector<Span> spans;  // oldest first
  bool wrapped = false;     // older spans were overwritten
};

// Snapshots every track of `tracer`, in the order they were added.
std::vector<TrackData> collect_trace(const Tracer& tracer);

// Timestamps are written in microseconds since `origin_ns`.
void write_chrome_trace(std::ostream& out, const std::vector<TrackData>& tracks, int64_t origin_ns);

// Writes to a file; Error(io) when it cannot.
void write_chrome_trace_file(const std::string& path, const std::vector<TrackData>& tracks, int64_t origin_ns);

}  // namespace troupe
