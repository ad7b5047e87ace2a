// DistilBERT (model/arch_bert.cpp) beyond what the sentence-transformers
// and transformers references check (tests/fixtures/hf/distilbert_*,
// tools/fixtures/make_distilbert_models.py; embedding_model_test.cpp and
// reranker_model_test.cpp run them): its config names, no token-type table,
// the ReLU head, and what Troupe refuses by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "model/model.hpp"
#include "tests/model/edited_fixture.hpp"
#include "tests/model/hf_reference_run.hpp"

namespace troupe {
namespace {

using hf_test::fixture_dir;
using Json = nlohmann::json;

TEST(DistilBert, ReadsItsConfigNames) {
  auto model = Model::load(fixture_dir("distilbert_embedding_mean"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "distilbert");
  EXPECT_FALSE(c.causal);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_ff, 128);
  EXPECT_EQ(c.n_ctx_train, 128);
  EXPECT_TRUE(c.gelu_erf);
  EXPECT_EQ(c.n_labels, 0);
  EXPECT_EQ(model->weights().type_embd, nullptr);  // no token types: a pair's second text adds nothing
  EXPECT_NE(model->weights().pos_embd.data, nullptr);

  auto classifier = Model::load(fixture_dir("distilbert_classifier"));
  EXPECT_EQ(classifier->config().cls_act, ModelConfig::ClassifierAct::relu);
  EXPECT_EQ(classifier->config().labels, (std::vector<std::string>{"NEGATIVE", "POSITIVE"}));
}

TEST(DistilBert, RefusesOtherActivations) {
  const std::string what = test::refusal("distilbert_embedding_mean", [](Json& c) { c["activation"] = "gelu_new"; });
  EXPECT_NE(what.find("activation 'gelu_new'"), std::string::npos) << what;
}

}  // namespace
}  // namespace troupe
