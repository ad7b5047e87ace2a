// Troupe's forward pass against Hugging Face transformers (fixtures made by
// tools/fixtures/make_*_fixture.py): the stories260K logits (f32 weights) and
// the default model SmolLM2-135M-Instruct (Q4_1/Q8_0 GGUF, which transformers
// dequantizes to f32), greedy tokens and last-position logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/cpu_backend.hpp"
#include "model/generator.hpp"
#include "model/model.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tests/exact_math.hpp"

namespace troupe {
namespace {

nlohmann::json load_reference(const std::string& name) {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/" + name);
  EXPECT_TRUE(in) << "missing fixture " << name;
  return in ? nlohmann::json::parse(in) : nlohmann::json{};
}

std::string default_gguf_path() {
  if (const char* p = std::getenv("TROUPE_DEFAULT_MODEL"); p != nullptr && *p != '\0') return p;
  const char* cache = std::getenv("TROUPE_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  const std::string dir = cache != nullptr && *cache != '\0' ? std::string(cache)
                                                             : std::string(home != nullptr ? home : ".") + "/.cache/troupe/models";
  return dir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// Transformers computes in f32 with another summation order; on these
// models its run-to-run changes of evaluation order moved logits by up to
// 3e-5 (see tools/fixtures/README.md). 1e-3 absolute on logits of magnitude
// ~20 leaves room for that and still catches any real error (a wrong rope,
// norm or quantized value moves logits by 1e-1 or more).
constexpr float kLogitTolerance = 1e-3f;

TEST(HfReference, Stories260KLogitsMatchTransformers) {
  const auto j = load_reference("stories260k_logits.json");
  auto model = Model::load(std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf");
  CpuBackend backend({.n_threads = 2});
  Generator gen(model, backend, {.n_ctx = 512});
  ASSERT_GE(j["cases"].size(), 4u);
  for (const auto& c : j["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = c["last_logits"].get<std::vector<float>>();
    const std::vector<float> got = gen.prompt_logits(prompt);
    ASSERT_EQ(got.size(), want.size());
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    EXPECT_LT(worst, 1e-4f) << "f32 model: max |logit difference| over the vocabulary";

    const auto want_ids = c["greedy_ids"].get<std::vector<int32_t>>();
    const auto ids = gen.generate(prompt, {.max_new_tokens = static_cast<int64_t>(want_ids.size()),
                                           .sampling = {.temperature = 0.0f},
                                           .stop_tokens = {-1}});
    EXPECT_EQ(ids, want_ids);
  }
}

TEST(HfReference, DefaultModelGreedyTokensMatchTransformers) {
  const test::ExactMath exact;  // a reference to float rounding
  const std::string path = default_gguf_path();
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "default model not found at " << path << " (scripts/setup fetches it)";
  }
  const auto j = load_reference("smollm2_greedy.json");
  auto model = Model::load(path);
  auto tok = Tokenizer::create(model->vocab());
  CpuBackend backend({.n_threads = 2});
  Generator gen(model, backend, {.n_ctx = 256});
  ASSERT_EQ(j["cases"].size(), 4u);
  for (const auto& c : j["cases"]) {
    SCOPED_TRACE(c["text"].get<std::string>());
    const auto want_prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(c["text"].get<std::string>(), false, true), want_prompt) << "tokenization differs from HF";

    const std::vector<float> logits = gen.prompt_logits(want_prompt);
    for (const auto& top : c["last_logits_top"]) {
      const int id = top[0].get<int>();
      EXPECT_NEAR(logits[static_cast<size_t>(id)], top[1].get<float>(), kLogitTolerance) << "token " << id;
    }

    const auto want_ids = c["greedy_ids"].get<std::vector<int32_t>>();
    const auto ids = gen.generate(want_prompt, {.max_new_tokens = static_cast<int64_t>(want_ids.size()),
                                                .sampling = {.temperature = 0.0f},
                                                .stop_tokens = {-1}});
    EXPECT_EQ(ids, want_ids);
  }
}

}  // namespace
}  // namespace troupe
