// The span ring and the Chrome trace export: ring wrap keeps the newest
// spans and their ids, the JSON parses and is in the trace-event format
// (one named track per actor, complete events, a flow per request in time
// order), and the summary names the busiest actor.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>

#include "telemetry/actor_summary.hpp"
#include "telemetry/chrome_trace.hpp"
#include "telemetry/trace_ring.hpp"

namespace troupe {
namespace {

TEST(TraceTrack, WrapKeepsTheNewestSpansWithTheirIds) {
  TraceTrack t("a", 4);
  for (int64_t i = 0; i < 10; ++i) {
    const std::vector<int64_t> ids{i, i + 100};
    t.record({.message = "m", .step = static_cast<uint64_t>(i), .engine = 0, .requests = ids}, i * 10, i * 10 + 1,
             i * 10 + 5);
  }
  EXPECT_EQ(t.recorded(), 10u);
  const std::vector<Span> spans = t.snapshot();
  ASSERT_EQ(spans.size(), 4u);
  for (size_t k = 0; k < spans.size(); ++k) {
    const int64_t i = 6 + static_cast<int64_t>(k);
    EXPECT_EQ(spans[k].step, static_cast<uint64_t>(i));
    EXPECT_EQ(spans[k].start_ns, i * 10 + 1);
    EXPECT_EQ(spans[k].requests, (std::vector<int64_t>{i, i + 100}));
  }
}

TEST(TraceTrack, ABatchLargerThanTheIdRingKeepsWhatFits) {
  TraceTrack t("a", 1);  // 8 id slots
  std::vector<int64_t> ids(20);
  for (int i = 0; i < 20; ++i) ids[i] = i;
  t.record({.message = "big", .requests = ids}, 0, 1, 2);
  EXPECT_EQ(t.snapshot().at(0).requests.size(), TraceTrack::kIdsPerSpan);
}

std::vector<TrackData> pipeline_like_trace() {
  // Request 1 goes scheduler -> executor -> detokenizer, twice (two steps);
  // request 2 joins the second step. The executor is busy most of the time.
  std::vector<TrackData> tracks(3);
  tracks[0].name = "scheduler";
  tracks[1].name = "executor_0";
  tracks[2].name = "detokenizer";
  auto span = [](const char* m, int64_t enq, int64_t a, int64_t b, std::vector<int64_t> ids, uint64_t step) {
    return Span{.message = m, .enqueue_ns = enq, .start_ns = a, .end_ns = b, .step = step, .engine = 0,
                .requests = std::move(ids)};
  };
  tracks[0].spans = {span("TokenRequest", 1000, 1000, 2000, {1}, kNoStep),
                     span("TokenRequest", 50000, 51000, 52000, {2}, kNoStep)};
  tracks[1].spans = {span("StageBatch", 2000, 3000, 43000, {1}, 0), span("StageBatch", 52000, 53000, 93000, {1, 2}, 1)};
  tracks[2].spans = {span("SampledStep", 43000, 45000, 46000, {1}, 0),
                     span("SampledStep", 93000, 94000, 100000, {1, 2}, 1)};
  return tracks;
}

TEST(ChromeTrace, IsValidTraceEventJsonWithOneTrackPerActorAndOrderedFlows) {
  std::ostringstream out;
  write_chrome_trace(out, pipeline_like_trace(), 0);
  const nlohmann::json doc = nlohmann::json::parse(out.str());
  ASSERT_TRUE(doc.contains("traceEvents"));
  std::map<int, std::string> track_names;
  std::map<int64_t, std::vector<std::pair<double, std::string>>> flows;  // id -> (ts, ph)
  int complete = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e.at("ph");
    ASSERT_TRUE(e.contains("pid"));
    ASSERT_TRUE(e.contains("tid"));
    if (ph == "M" && e["name"] == "thread_name") track_names[e["tid"]] = e["args"]["name"];
    if (ph == "X") {
      ++complete;
      EXPECT_GE(e.at("dur").get<double>(), 0);
      EXPECT_TRUE(e.at("ts").is_number());
      EXPECT_TRUE(e["args"].contains("requests"));
    }
    if (ph == "s" || ph == "t" || ph == "f") flows[e.at("id").get<int64_t>()].push_back({e.at("ts"), ph});
  }
  EXPECT_EQ(complete, 6);
  ASSERT_EQ(track_names.size(), 3u);
  EXPECT_EQ(track_names[1], "scheduler");
  EXPECT_EQ(track_names[2], "executor_0");
  EXPECT_EQ(track_names[3], "detokenizer");
  ASSERT_EQ(flows.size(), 2u);
  ASSERT_EQ(flows[1].size(), 5u);  // every span of request 1
  ASSERT_EQ(flows[2].size(), 3u);
  for (const auto& [id, points] : flows) {
    EXPECT_EQ(points.front().second, "s") << id;
    EXPECT_EQ(points.back().second, "f") << id;
    for (size_t k = 1; k < points.size(); ++k) EXPECT_LE(points[k - 1].first, points[k].first) << id;
  }
}

TEST(ChromeTrace, EscapesNames) {
  std::vector<TrackData> tracks(1);
  tracks[0].name = "a \"quoted\"\\ name\n";
  std::ostringstream out;
  write_chrome_trace(out, tracks, 0);
  const nlohmann::json doc = nlohmann::json::parse(out.str());
  bool found = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e["name"] == "thread_name") found = e["args"]["name"] == tracks[0].name;
  }
  EXPECT_TRUE(found);
}

TEST(ActorSummary, NamesTheBusiestActorAndMeasuresMailboxWait) {
  const TraceSummary s = summarize_trace(pipeline_like_trace());
  EXPECT_NEAR(s.window_s, 99e-6, 1e-12);
  ASSERT_EQ(s.actors.size(), 3u);
  EXPECT_EQ(s.bottleneck, "executor_0");
  EXPECT_NEAR(s.actors[1].busy_fraction, 80000.0 / 99000.0, 1e-9);
  EXPECT_EQ(s.actors[1].messages, 2u);
  EXPECT_NEAR(s.actors[1].wait_p50_us, 1.0, 1e-9);  // both waited 1 us
  EXPECT_NEAR(s.actors[2].wait_p99_us, 1.99, 1e-9);  // waits 2 and 1 us: rank 0.99 of [1, 2]
  EXPECT_NE(format_trace_summary(s).find("executor_0 (bottleneck)"), std::string::npos);
}

TEST(ActorSummary, EmptyTrace) {
  std::vector<TrackData> tracks(2);
  const TraceSummary s = summarize_trace(tracks);
  EXPECT_EQ(s.actors.size(), 2u);
  EXPECT_TRUE(s.bottleneck.empty());
}

}  // namespace
}  // namespace troupe
