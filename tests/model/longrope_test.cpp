// LongRoPE (Phi-3.5, Phi-4-mini): the phi3_longrope fixture (original
// context 6, max 48, 12 of 16 head dims rotated), read from its Hugging Face
// directory and from the GGUF file llama.cpp's converter made of it, held to
// transformers' logits (tools/fixtures/make_hf_tiny_models.py). Every
// reference prompt is longer than 6, so transformers ran them with the long
// factors; prompts_short ran with the short ones. Troupe picks one list at
// load by the context the engine will run, as llama.cpp does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "model/model_identity.hpp"
#include "tests/exact_math.hpp"
#include "tests/model/hf_reference_run.hpp"

namespace troupe {
namespace {

using namespace hf_test;  // NOLINT: the fixture helpers

std::string path_of(const std::string& form) {
  return form == "hf" ? fixture_dir("phi3_longrope") : std::string(TROUPE_FIXTURES_DIR) + "/gguf/phi3_longrope.gguf";
}

class LongRope : public testing::TestWithParam<std::string> {};

TEST_P(LongRope, ContextPastTheOriginalRunsTheLongFactors) {
  const test::ExactMath exact;
  const auto ref = reference("phi3_longrope");
  const auto model = Model::load(path_of(GetParam()), {.context_length = 48});
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.rope_orig_ctx, 6);
  EXPECT_EQ(c.n_rot, 12);
  EXPECT_NEAR(c.rope_mscale, ref["attention_factor"].get<double>(), 1e-6);  // sqrt(1 + ln 8 / ln 6)
  // The frequencies transformers used for these prompts.
  const auto inv_freq = ref["inv_freq"].get<std::vector<double>>();
  ASSERT_EQ(c.rope_freq_factors.size(), inv_freq.size());
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double got = std::pow(double(c.rope_theta), -2.0 * double(i) / double(c.n_rot)) / c.rope_freq_factors[i];
    EXPECT_NEAR(got / inv_freq[i], 1.0, 1e-6) << "pair " << i;
  }
  expect_reference_batch(model, ref);
}

TEST_P(LongRope, ContextWithinTheOriginalRunsTheShortFactors) {
  const test::ExactMath exact;
  nlohmann::json ref = reference("phi3_longrope");
  ref["prompts"] = ref["prompts_short"];
  for (const int64_t ctx : {int64_t{0}, int64_t{6}}) {  // 0: not known, taken as short
    SCOPED_TRACE("context " + std::to_string(ctx));
    const auto model = Model::load(path_of(GetParam()), {.context_length = ctx});
    EXPECT_EQ(model->config().rope_freq_factors, model->config().rope_short_factors);
    expect_matches(ref, run_reference_batch(model, ref, 1), model->config().n_vocab, kTolerance, "last_logits_short");
  }
  // The choice matters: the long factors on these prompts are off by what
  // transformers measured with its long table on them.
  const auto long_model = Model::load(path_of(GetParam()), {.context_length = 7});
  const BatchRun run = run_reference_batch(long_model, ref, 1);
  const int64_t n_vocab = long_model->config().n_vocab;
  float worst = 0;
  for (size_t i = 0; i < ref["prompts"].size(); ++i) {
    worst = std::max(worst, max_abs_diff(run.prompt_logits.data() + i * static_cast<size_t>(n_vocab),
                                         ref["last_logits_short"][i].get<std::vector<float>>()));
  }
  EXPECT_NEAR(worst, ref["max_diff_short_with_long_factors"].get<float>(), kTolerance);
  EXPECT_GT(worst, 1e-2f);
}

// A remote worker that chose the other list holds other weights in effect:
// the handshake's model identity tells them apart.
TEST_P(LongRope, TheChosenFactorsArePartOfTheModelIdentity) {
  const auto short_model = Model::load(path_of(GetParam()), {.context_length = 6});
  const auto long_model = Model::load(path_of(GetParam()), {.context_length = 48});
  const auto long_again = Model::load(path_of(GetParam()), {.context_length = 4096});
  EXPECT_NE(model_identity(*short_model), model_identity(*long_model));
  EXPECT_EQ(model_identity(*long_model), model_identity(*long_again));
}

INSTANTIATE_TEST_SUITE_P(Forms, LongRope, testing::Values("hf", "gguf"),
                         [](const testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace troupe
