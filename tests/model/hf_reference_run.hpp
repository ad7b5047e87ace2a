// Running the tiny Hugging Face fixtures (tests/fixtures/hf/<arch>/, made by
// tools/fixtures/make_hf_tiny_models.py) and comparing with transformers'
// reference.json: shared by the tests that load them as safetensors
// directories and as GGUF conversions.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/cpu_backend.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"

namespace troupe::hf_test {

// transformers computes in f32 with its own summation order; that moves
// logits (|logit| < 6 here) by ~1e-6, so 1e-4 catches any real error.
constexpr float kTolerance = 1e-4f;
constexpr int64_t kBlock = 4;  // small KV pages: every prompt spans several

inline std::string fixture_dir(const std::string& arch) { return std::string(TROUPE_FIXTURES_DIR) + "/hf/" + arch; }

inline nlohmann::json reference(const std::string& arch) {
  std::ifstream in(fixture_dir(arch) + "/reference.json");
  EXPECT_TRUE(in) << "missing fixture " << arch;
  return in ? nlohmann::json::parse(in) : nlohmann::json{};
}

inline float max_abs_diff(const float* a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < b.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

inline int32_t argmax(const float* x, int64_t n) { return static_cast<int32_t>(std::max_element(x, x + n) - x); }

// Runs the prompts as one batch, then decodes all of them together one token
// per step, each sequence in its own interleaved KV blocks. Returns the
// prompt logits [n_prompts, n_vocab] and fills the greedy continuations.
struct BatchRun {
  std::vector<float> prompt_logits;
  std::vector<std::vector<int32_t>> greedy;
};

inline BatchRun run_batched(const std::shared_ptr<const Model>& model, const std::vector<std::vector<int32_t>>& prompts,
                     int64_t n_new, std::vector<ModelStage*> stages) {
  const auto n_seqs = static_cast<int32_t>(prompts.size());
  const int64_t n_vocab = model->config().n_vocab;
  const int64_t n_embd = model->config().n_embd;
  const int64_t per_seq = stages.front()->options().n_kv_blocks / n_seqs;
  // Sequence i owns physical blocks i, i + n, i + 2n, ...: neighbours in the
  // pool belong to different sequences.
  std::vector<std::vector<int32_t>> tables(prompts.size());
  for (int32_t i = 0; i < n_seqs; ++i) {
    for (int64_t b = 0; b < per_seq; ++b) tables[static_cast<size_t>(i)].push_back(static_cast<int32_t>(i + b * n_seqs));
  }
  BatchRun run;
  run.greedy.resize(prompts.size());
  std::vector<int32_t> n_past(prompts.size(), 0);
  std::vector<float> logits(prompts.size() * static_cast<size_t>(n_vocab));
  std::vector<int32_t> tokens;
  for (const auto& p : prompts) tokens.insert(tokens.end(), p.begin(), p.end());
  for (int64_t step = 0;; ++step) {
    std::vector<BatchSeq> seqs;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto n = static_cast<int32_t>(step == 0 ? prompts[i].size() : 1);
      // State slots in reverse order: a slot is not a sequence's index.
      seqs.push_back({.n_tokens = n,
                      .n_past = n_past[i],
                      .block_table = tables[i],
                      .n_logits = 1,
                      .state_slot = n_seqs - 1 - static_cast<int32_t>(i)});
    }
    const BatchView batch{.tokens = tokens, .seqs = seqs};
    std::vector<float> hidden;
    const float* in = nullptr;
    for (ModelStage* s : stages) {
      if (s->is_last()) {
        s->forward(batch, in, logits.data());
      } else {
        hidden.assign(static_cast<size_t>(batch.n_tokens() * n_embd), 0.0f);
        s->forward(batch, in, hidden.data());
        in = hidden.data();
      }
    }
    if (step == 0) run.prompt_logits = logits;
    if (step == n_new) break;
    tokens.clear();
    for (size_t i = 0; i < prompts.size(); ++i) {
      n_past[i] += seqs[i].n_tokens;
      const int32_t next = argmax(logits.data() + i * static_cast<size_t>(n_vocab), n_vocab);
      run.greedy[i].push_back(next);
      tokens.push_back(next);
    }
    if (step + 1 == n_new) break;  // the last tokens' own logits are not needed
  }
  return run;
}

inline StageOptions stage_options(size_t n_seqs, int64_t first = 0, int64_t last = -1) {
  return {.first_layer = first,
          .last_layer = last,
          .max_tokens = 64,
          .max_seqs = static_cast<int64_t>(n_seqs),
          .n_kv_blocks = static_cast<int64_t>(n_seqs) * 10,  // 40 positions per sequence
          .kv_block_size = kBlock};
}

inline void expect_matches(const nlohmann::json& ref, const BatchRun& run, int64_t n_vocab, float tolerance,
                    const char* logits_key = "last_logits") {
  const auto& want = ref[logits_key];
  ASSERT_EQ(run.prompt_logits.size(), want.size() * static_cast<size_t>(n_vocab));
  for (size_t i = 0; i < want.size(); ++i) {
    const auto w = want[i].get<std::vector<float>>();
    ASSERT_EQ(static_cast<int64_t>(w.size()), n_vocab);
    EXPECT_LT(max_abs_diff(run.prompt_logits.data() + i * static_cast<size_t>(n_vocab), w), tolerance)
        << "prompt " << i << " (" << logits_key << ")";
  }
}

// The reference's prompts as one batch through one CPU stage, then n_new
// greedy steps.
inline BatchRun run_reference_batch(const std::shared_ptr<const Model>& model, const nlohmann::json& ref,
                                    int64_t n_new) {
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  CpuBackend backend({.n_threads = 2});
  ModelStage stage(model, backend, stage_options(prompts.size()));
  return run_batched(model, prompts, n_new, {&stage});
}

// ...held to the reference: logits within kTolerance, the same greedy tokens.
inline void expect_reference_batch(const std::shared_ptr<const Model>& model, const nlohmann::json& ref) {
  const auto greedy = ref["greedy"].get<std::vector<std::vector<int32_t>>>();
  const BatchRun run = run_reference_batch(model, ref, static_cast<int64_t>(greedy[0].size()));
  expect_matches(ref, run, model->config().n_vocab, kTolerance);
  EXPECT_EQ(run.greedy, greedy);
}

}  // namespace troupe::hf_test
