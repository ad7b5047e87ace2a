// ModernBERT (model/arch_modernbert.cpp) beyond what the sentence-transformers
// and transformers references check (tests/fixtures/hf/modernbert_*,
// tools/fixtures/make_modernbert_models.py; embedding_model_test.cpp and
// reranker_model_test.cpp run them): the layer kinds and RoPE bases read
// from transformers 5's config and from the older spelling the published
// checkpoints have, and what Troupe refuses by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/batch.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "tests/model/edited_fixture.hpp"
#include "tests/model/hf_reference_run.hpp"

namespace troupe {
namespace {

using hf_test::fixture_dir;
using test::EditedFixture;
using Json = nlohmann::json;

void expect_same_config(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.local_layers, b.local_layers);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_local_theta, b.rope_local_theta);
  EXPECT_EQ(a.n_rot, b.n_rot);
}

TEST(ModernBert, ReadsTheLayerKindsAndBases) {
  auto model = Model::load(fixture_dir("modernbert_classifier"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "modernbert");
  EXPECT_FALSE(c.causal);
  EXPECT_EQ(c.local_layers, (std::vector<uint8_t>{0, 1, 0, 1}));  // every second layer global
  EXPECT_EQ(c.sliding_window, 5);                                 // local_attention 8: |i - j| < 4 + 1
  EXPECT_EQ(c.rope_theta, 160000.0f);
  EXPECT_EQ(c.rope_local_theta, 10000.0f);
  EXPECT_EQ(c.n_rot, c.head_dim);
  EXPECT_EQ(c.cls_act, ModelConfig::ClassifierAct::gelu_norm);
  EXPECT_EQ(model->weights().layers[0].attn_norm, nullptr);  // the first layer reads the normed embeddings
  EXPECT_NE(model->weights().layers[1].attn_norm, nullptr);
}

// The published checkpoints' spelling: global_attn_every_n_layers,
// global_rope_theta and local_rope_theta, no layer_types.
TEST(ModernBert, OlderConfigSpellingReadsTheSame) {
  const EditedFixture legacy("modernbert_classifier", [](Json& c) {
    c.erase("layer_types");
    c.erase("rope_parameters");
    c["global_rope_theta"] = 160000.0;
    c["local_rope_theta"] = 10000.0;
  });
  expect_same_config(Model::load(legacy.dir())->config(), Model::load(fixture_dir("modernbert_classifier"))->config());
  // Defaults: every third layer global, bases 160000 and 10000, windows of 128.
  const EditedFixture bare("modernbert_classifier", [](Json& c) {
    for (const char* k : {"layer_types", "rope_parameters", "global_attn_every_n_layers", "local_attention"})
      c.erase(k);
  });
  const ModelConfig c = Model::load(bare.dir())->config();
  EXPECT_EQ(c.local_layers, (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(c.sliding_window, 65);
  EXPECT_EQ(c.rope_theta, 160000.0f);
  EXPECT_EQ(c.rope_local_theta, 10000.0f);
}

// classifier_pooling "mean": the head over the mean of every final-normed
// row (ClassifierFixture checks the logits). A step that does not hold the
// whole prompt, or asks for fewer rows, cannot make that mean: refused.
TEST(ModernBert, MeanPooledHeadNeedsTheWholePrompt) {
  auto model = Model::load(fixture_dir("modernbert_classifier_mean"));
  EXPECT_TRUE(model->config().cls_pool_mean);
  EXPECT_FALSE(Model::load(fixture_dir("modernbert_classifier"))->config().cls_pool_mean);
  CpuBackend backend({.n_threads = 1});
  ModelStage stage(model, backend, {.max_tokens = 16, .max_seqs = 2, .n_kv_blocks = 4, .embedding_output = true});
  const std::vector<int32_t> ids{1, 5, 6, 7, 2};
  const std::vector<int32_t> table{0};
  std::vector<float> out(ids.size() * static_cast<size_t>(model->config().n_labels));
  const BatchSeq one_row{.n_tokens = 5, .n_past = 0, .block_table = table, .n_logits = 1};
  try {
    stage.forward({.tokens = ids, .seqs = std::span<const BatchSeq>(&one_row, 1)}, nullptr, out.data());
    FAIL() << "a mean over one row of five";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("every row of its prompt"), std::string::npos) << e.what();
  }
  // Every row asked for: each holds the head of the same mean.
  const BatchSeq all{.n_tokens = 5, .n_past = 0, .block_table = table, .n_logits = 5};
  stage.forward({.tokens = ids, .seqs = std::span<const BatchSeq>(&all, 1)}, nullptr, out.data());
  const size_t n_labels = static_cast<size_t>(model->config().n_labels);
  for (size_t r = 1; r < ids.size(); ++r) {
    for (size_t l = 0; l < n_labels; ++l) EXPECT_EQ(out[r * n_labels + l], out[l]) << r;
  }
}

TEST(ModernBert, RefusesWhatItDoesNotRun) {
  auto refusal = [](const std::function<void(Json&)>& edit) { return test::refusal("modernbert_classifier", edit); };
  EXPECT_NE(refusal([](Json& c) { c["classifier_pooling"] = "max"; }).find("classifier_pooling 'max'"),
            std::string::npos);
  EXPECT_NE(refusal([](Json& c) { c["hidden_activation"] = "relu"; }).find("hidden_activation 'relu'"),
            std::string::npos);
  EXPECT_NE(refusal([](Json& c) { c["mlp_bias"] = true; }).find("mlp_bias"), std::string::npos);
}

}  // namespace
}  // namespace troupe
