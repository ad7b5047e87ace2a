// Gemma 3's image side and its open image blocks against transformers
// (tests/fixtures/hf/gemma3_vision, made by
// tools/fixtures/make_gemma3_vision_model.py): the config as transformers
// reads it, and the text model's last logits with the image features in
// place, each image's tokens seeing the whole image (Gemma 3's bidirectional
// blocks) and, as a check that the blocks matter, plain causal attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "kernels/cpu_backend.hpp"
#include "model/batch.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "tests/exact_math.hpp"
#include "tests/vision/llava_fixture.hpp"
#include "vision/vision_model.hpp"

namespace troupe::vision {
namespace {

using test::hf_fixture;
using test::hf_reference;

const std::string kName = "gemma3_vision";

// The HF fixtures' logit tolerance (tests/model/hf_reference_run.hpp).
constexpr double kTolerance = 1e-4;

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

TEST(Gemma3Vision, ReadsTheImageSideAsTransformersConfiguresIt) {
  const auto model = VisionModel::load(hf_fixture(kName));
  ASSERT_NE(model, nullptr);
  const VisionConfig& c = model->config();
  const nlohmann::json cfg = nlohmann::json::parse(test::file_bytes(hf_fixture(kName) + "/config.json"));
  EXPECT_EQ(c.projector, VisionConfig::Projector::gemma3);
  EXPECT_TRUE(c.post_norm);
  EXPECT_TRUE(c.open_attention);
  EXPECT_EQ(c.grid(), 8);
  EXPECT_EQ(c.pool, 2);  // 8x8 patches pooled to mm_tokens_per_image 16
  EXPECT_EQ(c.image_tokens(), cfg["mm_tokens_per_image"].get<int32_t>());
  EXPECT_EQ(c.image_token, cfg["image_token_index"].get<int32_t>());
  EXPECT_EQ(c.image_begin, cfg["boi_token_index"].get<int32_t>());
  EXPECT_EQ(c.image_end, cfg["eoi_token_index"].get<int32_t>());
  EXPECT_EQ(c.n_run, c.n_layer);
  EXPECT_EQ(c.text_embd, 64);
  EXPECT_EQ(VisionModel::unsupported_reason(hf_fixture(kName)), "");
}

struct Logits {
  std::vector<float> open;    // image tokens see their whole image
  std::vector<float> causal;  // plain causal attention
};

// The case's prompt through the whole text model in steps ending at `cuts`
// (and the prompt's end), the image features over their tokens: the last
// row's logits with the image blocks open, and causal.
Logits last_logits(const nlohmann::json& c, int32_t image_token, std::vector<int32_t> cuts = {}) {
  const auto model = Model::load(hf_fixture(kName));
  const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
  const auto features = c["image_features"].get<std::vector<float>>();
  const int64_t n_embd = model->config().n_embd;
  std::vector<int32_t> spans;  // (begin, end) of each image's tokens
  for (int32_t i = 0; i < static_cast<int32_t>(ids.size()); ++i) {
    if (ids[i] != image_token) continue;
    if (spans.empty() || spans.back() != i) spans.insert(spans.end(), {i, i + 1});
    spans.back() = i + 1;
  }
  cuts.push_back(static_cast<int32_t>(ids.size()));
  Logits out;
  for (const bool open : {true, false}) {
    CpuBackend backend({.n_threads = 2});
    ModelStage stage(model, backend, {.max_tokens = 128, .max_seqs = 1, .n_kv_blocks = 8, .kv_block_size = 16});
    const std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 6, 7};
    std::vector<float>& logits = open ? out.open : out.causal;
    logits.assign(static_cast<size_t>(model->config().n_vocab), 0.0f);
    int32_t begin = 0, image_row = 0;
    for (const int32_t end : cuts) {
      std::vector<InputEmbeds> embeds;
      std::vector<int32_t> step_spans;
      for (size_t s = 0; s < spans.size(); s += 2) {
        const int32_t from = std::max(begin, spans[s]), to = std::min(end, spans[s + 1]);
        if (from < to) {
          embeds.push_back({.offset = from - begin, .n_rows = to - from, .data = features.data() + image_row * n_embd});
          image_row += to - from;
          if (open) step_spans.insert(step_spans.end(), {spans[s], spans[s + 1]});
        }
      }
      const BatchSeq seq{.n_tokens = end - begin,
                         .n_past = begin,
                         .block_table = table,
                         .n_logits = end == cuts.back() ? 1 : 0,
                         .embeds = embeds,
                         .open_spans = step_spans};
      const std::vector<int32_t> tokens(ids.begin() + begin, ids.begin() + end);
      stage.forward({.tokens = tokens, .seqs = {&seq, 1}}, nullptr, logits.data());
      begin = end;
    }
  }
  return out;
}

TEST(Gemma3Vision, ImageTokensSeeTheirWholeImageAsTransformersComputes) {
  const test::ExactMath exact;
  const nlohmann::json ref = hf_reference(kName);
  const int32_t image_token = ref["image_token_id"].get<int32_t>();
  for (int k : {0, 1}) {  // one image; two images
    const nlohmann::json& c = ref["cases"][k];
    const auto want = c["last_logits"].get<std::vector<float>>();
    const auto want_causal = c["causal_last_logits"].get<std::vector<float>>();
    // The blocks move the logits far more than the tolerance: the test
    // fails if the kernel ignores them.
    ASSERT_GT(max_abs_diff(want_causal, want), 10 * kTolerance) << "case " << k;
    const Logits got = last_logits(c, image_token);
    ASSERT_EQ(got.open.size(), want.size());
    EXPECT_LT(max_abs_diff(got.open, want), kTolerance) << "case " << k;
    EXPECT_LT(max_abs_diff(got.causal, want_causal), kTolerance) << "case " << k;
  }
}

// Steps that end only outside the images (the scheduler's rule) give the
// logits of one whole step.
TEST(Gemma3Vision, StepsEndingOutsideTheImagesGiveTheSameLogits) {
  const test::ExactMath exact;
  const nlohmann::json ref = hf_reference(kName);
  const nlohmann::json& two = ref["cases"][1];
  const auto ids = two["prompt_ids"].get<std::vector<int32_t>>();
  const int32_t image_token = ref["image_token_id"].get<int32_t>();
  const auto first = static_cast<int32_t>(std::find(ids.begin(), ids.end(), image_token) - ids.begin());
  // Before the first image, right after it (inside the window of the
  // sliding layer) and three tokens later.
  const Logits got = last_logits(two, image_token, {first, first + 16, first + 19});
  EXPECT_LT(max_abs_diff(got.open, two["last_logits"].get<std::vector<float>>()), kTolerance);
}

}  // namespace
}  // namespace troupe::vision
