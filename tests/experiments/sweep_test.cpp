// Sweeps end to end on the real stories260K model: a topology x setting x
// load grid runs every combination in-process, each request completes with
// its planned output length, settings reach the pipeline (a KV pool of
// another size shows in the KV total), traces and results files appear; and
// the in-process runner keeps its closed loop at the client count.
#include "experiments/sweep.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "actors/pipeline.hpp"
#include "experiments/inprocess_runner.hpp"
#include "model/model_tokenizer.hpp"
#include "workload_test_util.hpp"

namespace troupe {
namespace {

const std::string kModel = std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";

std::string workload_file(const std::filesystem::path& dir) {
  return test::write_file(dir / "w.json", R"({"name": "tiny", "seed": 3, "requests": 6,
      "arrival": {"type": "poisson", "rate": 50},
      "prompt_tokens": {"type": "uniform", "min": 4, "max": 40}, "output_tokens": 5})");
}

TEST(Sweep, RunsEveryCombinationAndWritesResults) {
  const auto dir = test::temp_dir();
  const std::string topo = test::write_file(dir / "two.json", R"({
      // comments allowed
      "stages": [{"layers": [0, 2], "threads": 1}, {"layers": [2, -1], "threads": 1}],
      "kv": {"blocks": 64}})");
  SweepSpec spec{.model_path = kModel,
                 .topologies = {topo, ""},
                 .workload_path = workload_file(dir),
                 .rates = {50},
                 .clients = {2},
                 .settings = {{.key = "kv.blocks", .values = {"64", "96"}}},
                 .trace = true,
                 .out_dir = (dir / "out").string()};
  std::ostringstream log;
  const std::vector<RunSummary> runs = run_sweep(spec, log);
  ASSERT_EQ(runs.size(), 2u * 2u * 2u) << log.str();
  for (const RunSummary& s : runs) {
    EXPECT_EQ(s.ok, 6) << log.str();
    EXPECT_GT(s.output_tok_per_s, 0);
    EXPECT_GT(s.ttft.p50, 0);
    EXPECT_LE(s.ttft.p50, s.ttft.p99);
    EXPECT_LE(s.itl.p99, s.itl.max);
    EXPECT_FALSE(s.engine.bottleneck.empty());
    EXPECT_EQ(s.engine.kv_total_blocks, s.setting == "kv.blocks=64" ? 64 : 96) << s.setting;
    EXPECT_GT(s.engine.kv_peak_blocks, 0);
    EXPECT_TRUE((s.rate == 50 && s.clients == 0) || (s.rate == 0 && s.clients == 2));
  }
  EXPECT_EQ(runs[0].topology, "two");
  EXPECT_EQ(runs[4].topology, "one_stage");
  std::ifstream csv(dir / "out" / "results.csv");
  int lines = 0;
  for (std::string l; std::getline(csv, l);) ++lines;
  EXPECT_EQ(lines, 1 + 8);
  EXPECT_TRUE(std::filesystem::exists(dir / "out" / "results.md"));
  const auto trace = dir / "out" / "trace_two_kv.blocks_64_50rps.json";
  ASSERT_TRUE(std::filesystem::exists(trace)) << log.str();
  std::ifstream in(trace);
  EXPECT_TRUE(nlohmann::json::parse(in).contains("traceEvents"));
}

TEST(Sweep, BadInputsAreClearErrors) {
  const auto dir = test::temp_dir();
  std::ostringstream log;
  SweepSpec no_workload{.model_path = kModel};
  EXPECT_THROW(run_sweep(no_workload, log), Error);
  SweepSpec bad_key{.model_path = kModel,
                    .workload_path = workload_file(dir),
                    .settings = {{.key = "scheduler.no_such_knob", .values = {"1"}}}};
  try {
    run_sweep(bad_key, log);
    ADD_FAILURE() << "an unknown topology key must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no_such_knob"), std::string::npos) << e.what();
  }
  SweepSpec bad_rate{.model_path = kModel, .workload_path = workload_file(dir), .rates = {0}};
  EXPECT_THROW(run_sweep(bad_rate, log), Error);
  const std::string f = test::write_file(dir / "s.json", R"({"workload": "w.json", "ratez": [1]})");
  try {
    load_sweep(f);
    ADD_FAILURE() << "an unknown sweep key must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ratez"), std::string::npos) << e.what();
  }
}

TEST(Sweep, LoadSweepResolvesPathsAgainstItsFolder) {
  const auto dir = test::temp_dir();
  const std::string f = test::write_file(dir / "s.json", R"({"workload": "w.json", "topologies": ["t.json"],
      "rates": [1, 2], "clients": [4], "settings": {"scheduler.max_batch_size": [8, 32]}, "trace": true})");
  const SweepSpec s = load_sweep(f);
  EXPECT_EQ(s.workload_path, (dir / "w.json").string());
  EXPECT_EQ(s.topologies.at(0), (dir / "t.json").string());
  EXPECT_EQ(s.rates, (std::vector<double>{1, 2}));
  EXPECT_EQ(s.clients, std::vector<int32_t>{4});
  ASSERT_EQ(s.settings.size(), 1u);
  EXPECT_EQ(s.settings[0].values, (std::vector<std::string>{"8", "32"}));
  EXPECT_TRUE(s.trace);
}

TEST(InProcessRunner, ClosedLoopKeepsTheClientCountInFlight) {
  PipelineConfig config{.model_path = kModel};
  config.stages = {{.first_layer = 0, .last_layer = -1, .threads = 1}};
  std::unique_ptr<Pipeline> p = Pipeline::start(config);
  WorkloadSpec w{.seed = 1, .n_requests = 9, .arrival = {.kind = ArrivalSpec::Kind::concurrency, .clients = 3}};
  // Long enough that a request outlives the few microseconds the driver
  // takes to submit the next one (6 tokens of this model took 0.9 ms).
  w.output_tokens = {.kind = LengthDist::Kind::fixed, .value = 48};
  const std::vector<PlannedRequest> plan = plan_workload(w, p->tokenizer(), 100);
  const std::vector<RequestRecord> r = run_in_process(*p, plan, {.clients = 3});
  ASSERT_EQ(r.size(), 9u);
  // At any request's send time, at most 2 others are in flight.
  for (const RequestRecord& a : r) {
    EXPECT_TRUE(a.ok) << a.error;
    EXPECT_EQ(a.output_tokens, 48);
    EXPECT_EQ(a.token_s.size(), 48u);
    EXPECT_GE(a.first_token_s, a.sent_s);
    int in_flight = 0;
    for (const RequestRecord& b : r) in_flight += &a != &b && b.sent_s <= a.sent_s && b.end_s > a.sent_s;
    EXPECT_LE(in_flight, 2);
  }
  // More than one client: the second goes out without waiting for the
  // first. (Whether the third beats the first's end is a race the driver
  // does not promise: it submits the first three one after another.)
  EXPECT_LT(r[1].sent_s, r[0].end_s);
  // The k-th request (k >= 3) goes out only after k - 2 others ended.
  for (size_t k = 3; k < r.size(); ++k) {
    int ended = 0;
    for (const RequestRecord& b : r) ended += b.ok && b.end_s <= r[k].sent_s;
    EXPECT_GE(ended, static_cast<int>(k) - 2) << "request " << k;
  }
}

}  // namespace
}  // namespace troupe
