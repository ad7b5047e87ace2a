// Chrome trace-event JSON writer (see chrome_trace.hpp). Written by hand:
// the format is a flat list of small objects, and a run can hold a million
// of them, too many to build as a DOM first.
#include "telemetry/chrome_trace.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "core/error.hpp"

namespace troupe {
namespace {

constexpr int kPid = 1;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Microseconds with nanosecond precision.
std::string micros(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) * 1e-3);
  return buf;
}

struct FlowPoint {
  int64_t ts_ns;
  int tid;
};

}  // namespace

std::vector<TrackData> collect_trace(const Tracer& tracer) {
  std::vector<TrackData> out;
  for (const auto& t : tracer.tracks()) {
    out.push_back({.name = t->name(), .spans = t->snapshot(), .wrapped = t->recorded() > t->capacity()});
  }
  return out;
}

void write_chrome_trace(std::ostream& out, const std::vector<TrackData>& tracks, int64_t origin_ns) {
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out << R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"troupe pipeline"}})";
  std::map<int64_t, std::vector<FlowPoint>> flows;  // request id -> its spans' midpoints
  for (size_t i = 0; i < tracks.size(); ++i) {
    const int tid = static_cast<int>(i) + 1;
    out << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << kPid << ",\"tid\":" << tid
        << ",\"args\":{\"name\":" << json_string(tracks[i].name) << "}}";
    out << ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" << kPid << ",\"tid\":" << tid
        << ",\"args\":{\"sort_index\":" << tid << "}}";
    for (const Span& s : tracks[i].spans) {
      out << ",\n{\"name\":" << json_string(s.message) << ",\"cat\":\"actor\",\"ph\":\"X\",\"pid\":" << kPid
          << ",\"tid\":" << tid << ",\"ts\":" << micros(s.start_ns - origin_ns)
          << ",\"dur\":" << micros(s.end_ns - s.start_ns) << ",\"args\":{";
      bool first_arg = true;
      auto arg = [&](const char* key) {
        out << (first_arg ? "" : ",") << '"' << key << "\":";
        first_arg = false;
      };
      if (s.enqueue_ns > 0) {
        arg("mailbox_wait_us");
        out << micros(std::max<int64_t>(0, s.start_ns - s.enqueue_ns));
      }
      if (s.step != kNoStep) {
        arg("step");
        out << s.step;
        arg("engine");
        out << s.engine;
      }
      if (!s.requests.empty()) {
        arg("requests");
        out << '[';
        for (size_t k = 0; k < s.requests.size(); ++k) out << (k ? "," : "") << s.requests[k];
        out << ']';
      }
      out << "}}";
      // The flow binds to the slice enclosing its timestamp: the midpoint
      // is inside even for a zero-length slice.
      const int64_t mid = s.start_ns + (s.end_ns - s.start_ns) / 2;
      for (const int64_t id : s.requests) flows[id].push_back({mid, tid});
    }
  }
  for (auto& [id, points] : flows) {
    if (points.size() < 2) continue;
    std::stable_sort(points.begin(), points.end(),
                     [](const FlowPoint& a, const FlowPoint& b) { return a.ts_ns < b.ts_ns; });
    for (size_t k = 0; k < points.size(); ++k) {
      const char* ph = k == 0 ? "s" : (k + 1 == points.size() ? "f" : "t");
      out << ",\n{\"name\":\"request\",\"cat\":\"request\",\"ph\":\"" << ph << "\",\"id\":" << id
          << ",\"pid\":" << kPid << ",\"tid\":" << points[k].tid << ",\"ts\":" << micros(points[k].ts_ns - origin_ns)
          << (k == 0 ? "" : ",\"bp\":\"e\"") << '}';
    }
  }
  out << "\n]}\n";
}

void write_chrome_trace_file(const std::string& path, const std::vector<TrackData>& tracks, int64_t origin_ns) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error(Errc::io, "cannot write the trace file " + path);
  write_chrome_trace(f, tracks, origin_ns);
  f.flush();
  if (!f) throw Error(Errc::io, "writing the trace file " + path + " failed");
}

}  // namespace troupe
