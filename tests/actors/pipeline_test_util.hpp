// Shared helpers of the actor pipeline tests: the stories260K model, prompts
// of various lengths, each request's reference output from Generator (the
// request run alone, in one loop, no actors), and waiting with a timeout.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"
#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/generator.hpp"
#ifdef TROUPE_HAVE_CUDA
#include "kernels/cuda_backend.hpp"
#endif

namespace troupe::test {

inline const std::shared_ptr<const Model>& stories_model() {
  static const std::shared_ptr<const Model> model =
      Model::load(std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf");
  return model;
}

inline const Tokenizer& stories_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = Tokenizer::create(stories_model()->vocab());
  return *tok;
}

struct Case {
  std::vector<int32_t> prompt;
  int32_t max_new_tokens = 0;
  std::vector<int32_t> expected;  // Generator's greedy output, run alone
};

inline std::vector<int32_t> eog_tokens(const Tokenizer& tok) {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (tok.is_eog(id)) out.push_back(id);
  }
  return out;
}

// Greedy output of one request alone (the reference).
inline std::vector<int32_t> reference(const std::vector<int32_t>& prompt, int32_t max_new_tokens,
                                      bool ignore_eos = false) {
  CpuBackend backend({.n_threads = 1});
  Generator gen(stories_model(), backend);
  GenerateRequest req{.max_new_tokens = max_new_tokens};
  req.sampling.temperature = 0.0f;
  req.stop_tokens = ignore_eos ? std::vector<int32_t>{-1} : eog_tokens(stories_tokenizer());
  return gen.generate(prompt, req);
}

// n cases with different prompts (1 to ~150 tokens) and lengths (4 to ~90).
inline std::vector<Case> make_cases(int n) {
  static const char* starts[] = {"Once upon a time", "The little dog", "Tom and Sue went to the park",
                                 "One day, a bird", "Lily had a red ball", "The sun was hot",
                                 "A big fish swam", "Ben and his mom"};
  const Tokenizer& tok = stories_tokenizer();
  std::vector<Case> cases;
  for (int i = 0; i < n; ++i) {
    std::string text = starts[i % 8];
    // Some long prompts: a few sentences repeated (chunked prefill, prefix sharing).
    for (int r = 0; r < (i % 5) * (i % 3); ++r) text += ". She was happy and played with her friends all day";
    if (i % 7 == 3) text += " and";
    Case c;
    c.prompt = tok.encode(text, true, false);
    c.max_new_tokens = 4 + (i * 37) % 88;
    c.expected = reference(c.prompt, c.max_new_tokens);
    cases.push_back(std::move(c));
  }
  return cases;
}

inline std::vector<int32_t> ids_of(const Completion& c) {
  std::vector<int32_t> ids;
  for (const TokenEvent& e : c.tokens) ids.push_back(e.token);
  return ids;
}

// The text the pipeline streams for `generated` after `prompt`: the decoded
// whole minus the decoded prompt.
inline std::string continuation_text(const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated) {
  const Tokenizer& tok = stories_tokenizer();
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  const std::string whole = tok.decode(all, true);
  const std::string head = tok.decode(prompt, true);
  EXPECT_EQ(whole.compare(0, head.size(), head), 0);
  return whole.substr(head.size());
}

template <class T>
T wait_for(std::future<T>& f, std::chrono::seconds limit = std::chrono::seconds(30)) {
  if (f.wait_for(limit) != std::future_status::ready) {
    ADD_FAILURE() << "no final event within " << limit.count() << " s";
    return T{};
  }
  return f.get();
}

inline PipelineConfig stories_config(std::vector<StageSpec> stages) {
  PipelineConfig c{.model = stories_model(), .stages = std::move(stages)};
  c.scheduler.max_batch_size = 16;
  c.scheduler.max_tokens_per_step = 96;
  c.scheduler.prefill_chunk = 32;
  c.n_kv_blocks = 512;
  return c;
}

inline std::vector<StageSpec> split(int n_stages) {
  switch (n_stages) {
    case 1: return {{.first_layer = 0, .last_layer = -1, .threads = 1}};
    case 2: return {{.first_layer = 0, .last_layer = 2, .threads = 1}, {.first_layer = 2, .last_layer = -1, .threads = 1}};
    default:
      return {{.first_layer = 0, .last_layer = 2, .threads = 1},
              {.first_layer = 2, .last_layer = 4, .threads = 1},
              {.first_layer = 4, .last_layer = -1, .threads = 1}};
  }
}

// "kind: message" of the Error that Pipeline::start throws, or "started".
inline std::string start_error(PipelineConfig cfg) {
  try {
    auto p = Pipeline::start(std::move(cfg));
  } catch (const Error& e) {
    return std::string(to_string(e.code())) + ": " + e.what();
  }
  return "started";
}

inline GenerateParams greedy(int32_t max_new_tokens) {
  GenerateParams p{.max_new_tokens = max_new_tokens};
  p.sampling.temperature = 0.0f;
  return p;
}

// Whether a CUDA stage can run here; why not in *why.
inline bool gpu_usable(std::string* why) {
#ifdef TROUPE_HAVE_CUDA
  return cuda_available(why);
#else
  *why = "this build has no CUDA backend";
  return false;
#endif
}

// Runs the cases through a pipeline with a GPU stage and holds its greedy
// tokens to the CPU's (the cases' expected). Same weights, another
// summation order (GPU reductions): a greedy choice may part from the CPU's
// after a near tie, so the first tokens must agree and whole sequences
// nearly always (14 of 16).
inline void expect_near_cpu_tokens(Pipeline& p, const std::vector<Case>& cases) {
  std::vector<std::future<Completion>> runs;
  for (const Case& c : cases) runs.push_back(p.generate(c.prompt, greedy(c.max_new_tokens)));
  size_t same = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    const Completion got = wait_for(runs[i], std::chrono::seconds(120));
    EXPECT_NE(got.final.reason, EndReason::error) << got.final.error_message;
    const std::vector<int32_t> ids = ids_of(got);
    const size_t n = std::min<size_t>(4, cases[i].expected.size());
    ASSERT_GE(ids.size(), n);
    EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + static_cast<long>(n)),
              std::vector<int32_t>(cases[i].expected.begin(), cases[i].expected.begin() + static_cast<long>(n)))
        << "request " << i;
    same += ids == cases[i].expected ? 1 : 0;
  }
  std::printf("greedy sequences identical to the CPU's: %zu of %zu\n", same, runs.size());
  EXPECT_GE(same, runs.size() - runs.size() / 8);
}

}  // namespace troupe::test
