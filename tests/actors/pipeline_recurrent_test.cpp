// A model with recurrent layers through the actor pipeline: the Qwen3.5
// fixture (tests/fixtures/gguf/qwen3_5.gguf, llama.cpp's conversion of the
// tiny checkpoint held to transformers in tests/model), whose Gated DeltaNet
// layers keep a state per sequence in the stages' slots, and Granite
// 4.0-H's (granite_hybrid.gguf), whose Mamba-2 layers do. Concurrent
// requests through one and two stages, under KV pressure with preemption
// (recompute starts a slot afresh), and through a `troupe stage` worker give
// each request's output run alone (Generator); every slot is free at the
// end; speculative decoding and a worker with too few slots are refused
// with their reasons.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "pipeline_test_util.hpp"
#include "stage_process.hpp"

namespace troupe {
namespace {

using namespace std::chrono_literals;

const std::string kQwen35 = std::string(TROUPE_FIXTURES_DIR) + "/gguf/qwen3_5.gguf";
const std::string kGranite = std::string(TROUPE_FIXTURES_DIR) + "/gguf/granite_hybrid.gguf";

const std::shared_ptr<const Model>& qwen35() {
  static const std::shared_ptr<const Model> model = Model::load(kQwen35);
  return model;
}

const std::shared_ptr<const Model>& granite() {
  static const std::shared_ptr<const Model> model = Model::load(kGranite);
  return model;
}

struct RecurrentCase {
  std::vector<int32_t> prompt;
  int32_t max_new_tokens = 0;
  std::vector<int32_t> expected;
};

// Prompts of 1 to 70 byte tokens (several prefill chunks) with 3 to 24 new
// tokens, each run alone through the Generator for its expected output.
std::vector<RecurrentCase> make_cases(const std::shared_ptr<const Model>& model, int n) {
  std::mt19937 rng(7);
  std::vector<RecurrentCase> cases;
  CpuBackend backend({.n_threads = 1});
  Generator gen(model, backend, {.n_ctx = 128, .prefill_chunk = 16});
  for (int i = 0; i < n; ++i) {
    RecurrentCase c;
    const int len = 1 + static_cast<int>(rng() % 70);
    for (int t = 0; t < len; ++t) c.prompt.push_back(static_cast<int32_t>(rng() % 256));
    c.max_new_tokens = 3 + static_cast<int32_t>(rng() % 22);
    GenerateRequest req{.max_new_tokens = c.max_new_tokens};
    req.sampling.temperature = 0.0f;
    req.stop_tokens = {-1};
    c.expected = gen.generate(c.prompt, req);
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<RecurrentCase>& cases24() {
  static const std::vector<RecurrentCase> cases = make_cases(qwen35(), 24);
  return cases;
}

PipelineConfig qwen35_config(std::vector<StageSpec> stages, std::shared_ptr<const Model> model = qwen35()) {
  PipelineConfig c{.model = std::move(model), .stages = std::move(stages)};
  c.scheduler.max_batch_size = 8;
  c.scheduler.max_tokens_per_step = 48;
  c.scheduler.prefill_chunk = 16;
  c.scheduler.context_length = 128;
  c.n_kv_blocks = 256;
  return c;
}

GenerateParams greedy_all(int32_t n) {
  GenerateParams p = test::greedy(n);
  p.ignore_eos = true;  // the byte vocabulary's ends are arbitrary bytes here
  return p;
}

void run_and_check(Pipeline& p, const std::vector<RecurrentCase>& cases) {
  std::vector<std::future<Completion>> runs;
  for (const RecurrentCase& c : cases) runs.push_back(p.generate(c.prompt, greedy_all(c.max_new_tokens)));
  for (size_t i = 0; i < runs.size(); ++i) {
    const Completion got = test::wait_for(runs[i], 120s);
    EXPECT_EQ(test::ids_of(got), cases[i].expected) << "request " << i << ": " << got.final.error_message;
  }
  const KvSnapshot kv = p.kv_snapshot();
  EXPECT_EQ(kv.invariant_error, "");  // every state slot free again, none held twice
  EXPECT_EQ(kv.n_used, 0);
}

std::vector<StageSpec> two_stages() {
  return {{.first_layer = 0, .last_layer = 2, .threads = 1}, {.first_layer = 2, .last_layer = -1, .threads = 1}};
}

TEST(PipelineRecurrent, ConcurrentRequestsMatchEachRunAlone) {
  for (const int n_stages : {1, 2}) {
    SCOPED_TRACE(std::to_string(n_stages) + " stages");
    auto p = Pipeline::start(qwen35_config(n_stages == 1 ? std::vector<StageSpec>{} : two_stages()));
    run_and_check(*p, cases24());
    EXPECT_EQ(p->stats().finished, 24u);
  }
}

// Too few KV blocks for every request at once: preempted sequences are
// recomputed from position 0, which starts their (new) slot from zero.
TEST(PipelineRecurrent, PreemptionRecomputesTheState) {
  PipelineConfig cfg = qwen35_config(two_stages());
  cfg.n_kv_blocks = 14;  // 224 positions for 8 running requests of up to ~95
  cfg.scheduler.kv_watermark = 0.0;
  cfg.scheduler.kv_demand_fraction = 0.0;
  auto p = Pipeline::start(cfg);
  run_and_check(*p, cases24());
  EXPECT_GT(p->stats().preemptions, 0u);
}

// Granite 4.0-H's Mamba-2 layers (0, 1 and 3) keep their state in the same
// slots, over two stages.
TEST(PipelineRecurrent, Mamba2LayersToo) {
  const std::vector<RecurrentCase> cases = make_cases(granite(), 12);
  auto p = Pipeline::start(qwen35_config(two_stages(), granite()));
  run_and_check(*p, cases);
}

TEST(PipelineRecurrent, SpeculativeDecodingIsRefused) {
  PipelineConfig cfg = qwen35_config({});
  cfg.scheduler.spec_max_draft = 4;
  const std::string e = test::start_error(cfg);
  EXPECT_EQ(e.rfind("unsupported: ", 0), 0u) << e;
  EXPECT_NE(e.find("recurrent state"), std::string::npos) << e;
}

std::vector<std::string> worker_args(const std::string& layers, std::vector<std::string> extra = {}) {
  std::vector<std::string> a{"-m", kQwen35, "--layers", layers, "-t", "1", "--kv-blocks", "256", "--max-seqs", "8",
                             "--max-tokens", "48", "--ctx", "128"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// The worker keeps the state of its layers (2 and 3, both recurrent) in its
// own slots, named by the head in each step.
TEST(PipelineRecurrent, RemoteWorkerHoldsItsLayersState) {
  test::StageProcess w;
  ASSERT_TRUE(w.start(worker_args("2:4")));
  PipelineConfig cfg = qwen35_config({{.first_layer = 0, .last_layer = 2, .threads = 1},
                                      {.first_layer = 2, .last_layer = -1, .remote = w.address()}});
  cfg.remote.step_timeout_ms = 10000;
  cfg.remote.hello_timeout_ms = 5000;
  auto p = Pipeline::start(cfg);
  run_and_check(*p, cases24());
}

// Two engines of 8 need 16 slots; a worker with 8 says which flag to give.
TEST(PipelineRecurrent, WorkerWithTooFewSlotsIsRefused) {
  test::StageProcess w;
  ASSERT_TRUE(w.start(worker_args("2:4", {"--state-slots", "8"})));
  PipelineConfig cfg = qwen35_config({{.first_layer = 0, .last_layer = 2, .threads = 1},
                                      {.first_layer = 2, .last_layer = -1, .remote = w.address()}});
  cfg.remote.hello_timeout_ms = 5000;
  const std::string e = test::start_error(cfg);
  EXPECT_NE(e.find("recurrent state differs: the head runs up to 16 sequences at once, the worker holds state for 8 "
                   "(give the worker --state-slots 16)"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace troupe
