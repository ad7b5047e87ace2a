// Tracing and anomaly flags on the real pipeline (stories260K): a traced
// 3-stage run gives the same tokens as untraced generation, its trace file
// is trace-event JSON with one track per actor and every request's spans
// in order through the stages; a stage that sleeps on a few steps raises
// step-time anomalies naming the request, a steadily sleeping one does not.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "actors/pipeline_extensions.hpp"
#include "pipeline_test_util.hpp"
#include "tests/wait_until.hpp"

namespace troupe {
namespace {

TEST(PipelineTrace, OneTrackPerActorAndEachRequestFlowsThroughTheStagesInOrder) {
  PipelineConfig config = test::stories_config(test::split(3));
  config.trace = {.enabled = true, .capacity = 4096};
  std::unique_ptr<Pipeline> p = Pipeline::start(config);
  ASSERT_TRUE(p->tracing());
  const char* texts[] = {"Once upon a time", "The little dog", "Lily had a red ball", "The sun was hot"};
  std::vector<std::future<Completion>> runs;
  for (const char* t : texts) runs.push_back(p->generate(TextPrompt{.text = t}, test::greedy(6)));
  std::vector<RequestId> ids;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Completion c = test::wait_for(runs[i]);
    ids.push_back(c.final.id);
    const std::vector<int32_t> prompt = test::stories_tokenizer().encode(texts[i], true, false);
    EXPECT_EQ(test::ids_of(c), test::reference(prompt, 6)) << texts[i];
  }

  const std::string path = (std::filesystem::temp_directory_path() / "troupe_pipeline_trace.json").string();
  auto read_trace = [&] {
    p->write_trace(path);
    std::ifstream in(path);
    nlohmann::json doc = nlohmann::json::parse(in);
    std::filesystem::remove(path);
    return doc;
  };
  // An actor records a span when its handler returns, after it has passed the
  // step on, so a stage's last span can land after the request has completed
  // downstream. Read again (up to 10 s) until every stage holds as many spans.
  auto stages_settled = [](const nlohmann::json& doc) {
    std::map<int, int> spans;  // tid -> complete spans
    std::map<std::string, int> of_stage;
    for (const auto& e : doc.at("traceEvents")) {
      if (e.at("ph") == "X") ++spans[e.at("tid").get<int>()];
    }
    for (const auto& e : doc.at("traceEvents")) {
      if (e.at("ph") == "M" && e.at("name") == "thread_name") {
        of_stage[e.at("args").at("name").get<std::string>()] = spans[e.at("tid").get<int>()];
      }
    }
    return of_stage["executor_0"] == of_stage["executor_1"] && of_stage["executor_1"] == of_stage["executor_2"];
  };
  nlohmann::json doc;
  test::wait_until([&] { return stages_settled(doc = read_trace()); }, std::chrono::seconds(10));

  std::map<int, std::string> track;  // tid -> actor
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") track[e.at("tid")] = e.at("args").at("name");
  }
  std::set<std::string> actors;
  for (const auto& [tid, name] : track) actors.insert(name);
  EXPECT_EQ(actors, (std::set<std::string>{"tokenizer", "scheduler", "executor_0", "executor_1", "executor_2",
                                           "sampler", "detokenizer"}));

  // Per request: the actors its spans ran on, in time order.
  // (The sampler and detokenizer also see SeqOpen before the first step:
  // the sampler's place in the chain is its first StepLogits.)
  std::map<int64_t, std::vector<std::pair<double, std::string>>> path_of;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    ASSERT_TRUE(track.count(e.at("tid")));
    EXPECT_GE(e.at("dur").get<double>(), 0.0);
    if (!e.at("args").contains("requests")) continue;
    for (const auto& id : e.at("args").at("requests")) {
      std::string actor = track[e.at("tid")];
      if (actor == "sampler" && e.at("name") != "StepLogits") continue;
      path_of[id.get<int64_t>()].push_back({e.at("ts").get<double>(), actor});
    }
  }
  for (const RequestId id : ids) {
    auto& spans = path_of[id];
    std::stable_sort(spans.begin(), spans.end());
    std::map<std::string, int> count;
    std::map<std::string, double> first;
    for (const auto& [ts, actor] : spans) {
      if (count[actor]++ == 0) first[actor] = ts;
    }
    // Every step of the request passes every stage once, then the sampler.
    EXPECT_GE(count["executor_0"], 2) << id;  // prefill and decode steps
    EXPECT_EQ(count["executor_0"], count["executor_1"]) << id;
    EXPECT_EQ(count["executor_1"], count["executor_2"]) << id;
    EXPECT_LT(first["tokenizer"], first["scheduler"]) << id;
    EXPECT_LT(first["scheduler"], first["executor_0"]) << id;
    EXPECT_LT(first["executor_0"], first["executor_1"]) << id;
    EXPECT_LT(first["executor_1"], first["executor_2"]) << id;
    EXPECT_LT(first["executor_2"], first["sampler"]) << id;
  }
  // Flow events: one flow per request, starting with "s" and ending "f".
  std::map<int64_t, std::string> phases;
  for (const auto& e : doc.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "s" || ph == "t" || ph == "f") phases[e.at("id").get<int64_t>()] += ph;
  }
  for (const RequestId id : ids) {
    ASSERT_GE(phases[id].size(), 2u) << id;
    EXPECT_EQ(phases[id].front(), 's');
    EXPECT_EQ(phases[id].back(), 'f');
  }

  const TraceSummary summary = p->trace_summary();
  EXPECT_EQ(summary.actors.size(), 7u);
  EXPECT_FALSE(summary.bottleneck.empty());
  for (const ActorSummary& a : summary.actors) {
    EXPECT_GT(a.messages, 0u) << a.actor;
    EXPECT_GE(a.busy_fraction, 0.0);
    EXPECT_LE(a.busy_fraction, 1.0 + 1e-9) << a.actor;
  }
}

TEST(PipelineTrace, WriteTraceWithoutTracingIsAnError) {
  std::unique_ptr<Pipeline> p = Pipeline::start(test::stories_config(test::split(1)));
  EXPECT_FALSE(p->tracing());
  EXPECT_TRUE(p->trace().empty());
  EXPECT_THROW(p->write_trace("/tmp/never.json"), Error);
}

// One request decoding 48 tokens through a stage whose every step sleeps
// `base`, and `slow` on steps in [slow_from, slow_to): steps of tens of
// milliseconds, so that scheduling noise on a loaded machine stays small
// against them.
struct AnomalyRun {
  std::map<std::string, uint64_t> counts;
  std::vector<AnomalyEvent> events;
  std::vector<std::string> logged;
  RequestId id = 0;
};

AnomalyRun run_with_sleeps(uint64_t slow_from, uint64_t slow_to) {
  AnomalyRun out;
  std::mutex mu;
  PipelineConfig config = test::stories_config(test::split(1));
  config.on_anomaly = [&](const AnomalyEvent& e) {
    std::lock_guard lock(mu);
    out.logged.push_back(describe(e));
  };
  PipelineExtensions ext;
  ext.before_stage_step = [=](int32_t, uint64_t step) {
    const bool slow = step >= slow_from && step < slow_to;
    std::this_thread::sleep_for(std::chrono::milliseconds(slow ? 150 : 15));
  };
  {
    std::unique_ptr<Pipeline> p = Pipeline::start(config, ext);
    GenerateParams params = test::greedy(48);
    params.ignore_eos = true;
    std::future<Completion> f = p->generate(std::vector<int32_t>{1, 403, 407}, params);
    const Completion c = test::wait_for(f, std::chrono::seconds(60));
    EXPECT_EQ(c.final.completion_tokens, 48);
    out.id = c.final.id;
    out.counts = p->anomaly_counts();
    out.events = p->recent_anomalies();
  }
  return out;
}

TEST(PipelineAnomaly, SteadyRunRaisesNoFlag) {
  const AnomalyRun r = run_with_sleeps(0, 0);
  EXPECT_EQ(r.counts.count("step_time") ? r.counts.at("step_time") : 0u, 0u);
  EXPECT_TRUE(r.logged.empty()) << r.logged.front();
}

TEST(PipelineAnomaly, AStageThatSleepsRaisesStepTimeFlagsNamingTheRequest) {
  const AnomalyRun r = run_with_sleeps(30, 32);
  ASSERT_TRUE(r.counts.count("step_time"));
  EXPECT_GE(r.counts.at("step_time"), 1u);
  EXPECT_LE(r.counts.at("step_time"), 2u);
  ASSERT_FALSE(r.events.empty());
  const AnomalyEvent& e = r.events.front();
  EXPECT_EQ(e.metric, "step_time");
  EXPECT_GE(e.step, 30u);
  EXPECT_LT(e.step, 32u);
  EXPECT_GT(e.value_s, 0.14);
  EXPECT_LT(e.baseline_s, 0.1);
  EXPECT_EQ(e.requests, std::vector<int64_t>{r.id});
  ASSERT_FALSE(r.logged.empty());
  EXPECT_NE(r.logged.front().find("requests " + std::to_string(r.id)), std::string::npos) << r.logged.front();
}

}  // namespace
}  // namespace troupe
