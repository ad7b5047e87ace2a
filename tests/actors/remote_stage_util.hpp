// What the remote-stage tests share (remote_stage_test.cpp: chains and
// faults; remote_stage_refusal_test.cpp: what a worker refuses): the
// stories260K head and its worker's flags, a probe of a worker's counters,
// and one process's tokens to compare a chain with.
#pragma once

#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/interfaces.hpp"
#include "pipeline_test_util.hpp"
#include "stage_process.hpp"

namespace troupe::test {

using namespace std::chrono_literals;

inline const std::string kStories = std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";

inline std::string smollm2_gguf() {
  const char* cache = std::getenv("TROUPE_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  return (cache ? std::string(cache) : std::string(home ? home : "") + "/.cache/troupe/models") +
         "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Asks a worker for its counters, as an outside observer (no session).
class Probe {
 public:
  Probe() {
    cfg_.add_message_types<caf::id_block::troupe>();
    cfg_.load<caf::io::middleman>();
    system_ = std::make_unique<caf::actor_system>(cfg_);
  }

  WorkerStats stats(uint16_t port) {
    auto w = system_->middleman().remote_actor<stage_worker_actor>("127.0.0.1", port);
    if (!w) {
      ADD_FAILURE() << "cannot reach the worker on port " << port;
      return {};
    }
    WorkerStats out;
    caf::scoped_actor self{*system_};
    self->request(*w, 5s, stats_atom_v)
        .receive([&](WorkerStats& s) { out = s; }, [&](caf::error& e) { ADD_FAILURE() << system_->render(e); });
    return out;
  }

  // Ended requests are forgotten asynchronously: wait a little for zero.
  void expect_idle(uint16_t port) {
    WorkerStats s;
    for (int i = 0; i < 50; ++i) {
      s = stats(port);
      if (s.live_sequences == 0 && s.kv_blocks_in_use == 0) return;
      std::this_thread::sleep_for(100ms);
    }
    ADD_FAILURE() << "worker on port " << port << " still holds " << s.live_sequences << " sequences, "
                  << s.kv_blocks_in_use << " KV blocks";
  }

 private:
  caf::actor_system_config cfg_;
  std::unique_ptr<caf::actor_system> system_;
};

inline void expect_head_idle(const Pipeline& p) {
  const KvSnapshot kv = p.kv_snapshot();
  EXPECT_EQ(kv.invariant_error, "");
  EXPECT_EQ(kv.n_used, 0);
  EXPECT_TRUE(kv.sequences.empty());
}

inline PipelineConfig stories_head(std::vector<StageSpec> stages) {
  PipelineConfig c = stories_config(std::move(stages));
  c.remote.step_timeout_ms = 10000;
  c.remote.hello_timeout_ms = 5000;
  return c;
}

// The worker's flags that match stories_head's geometry.
inline std::vector<std::string> stories_worker(const std::string& layers, std::vector<std::string> extra = {}) {
  std::vector<std::string> a{"-m", kStories, "--layers", layers, "-t", "1", "--kv-blocks", "512"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

inline std::vector<Completion> run_concurrently(Pipeline& p, const std::vector<std::vector<int32_t>>& prompts,
                                                int32_t n) {
  std::vector<std::future<Completion>> runs;
  for (const auto& prompt : prompts) runs.push_back(p.generate(prompt, greedy(n)));
  std::vector<Completion> out;
  for (auto& r : runs) out.push_back(wait_for(r, 120s));
  return out;
}

// The prompts of make_cases(n), and the tokens one process running
// `model` whole gives them (12 each, run concurrently).
inline std::vector<std::vector<int32_t>> case_prompts(int n) {
  std::vector<std::vector<int32_t>> prompts;
  for (const test::Case& c : make_cases(n)) prompts.push_back(c.prompt);
  return prompts;
}

inline std::vector<std::vector<int32_t>> one_process_ids(const std::shared_ptr<const Model>& model,
                                                         const std::vector<std::vector<int32_t>>& prompts) {
  PipelineConfig local = stories_head({{.first_layer = 0, .last_layer = -1, .threads = 1}});
  local.model = model;
  auto p = Pipeline::start(local);
  std::vector<std::vector<int32_t>> ids;
  for (const Completion& c : run_concurrently(*p, prompts, 12)) ids.push_back(ids_of(c));
  return ids;
}

// Layers 0-2 here and 2-5 on worker w, the head running `model`: the
// prompts get `want`, and head and worker end idle.
inline void expect_chain_gives(const std::shared_ptr<const Model>& model, const StageProcess& w,
                               const std::vector<std::vector<int32_t>>& prompts,
                               const std::vector<std::vector<int32_t>>& want) {
  PipelineConfig head = stories_head(
      {{.first_layer = 0, .last_layer = 2, .threads = 1}, {.first_layer = 2, .last_layer = -1, .remote = w.address()}});
  head.model = model;
  auto p = Pipeline::start(head);
  const std::vector<Completion> got = run_concurrently(*p, prompts, 12);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(ids_of(got[i]), want[i]) << "request " << i;
  expect_head_idle(*p);
  Probe().expect_idle(w.port());
}

}  // namespace troupe::test
