// Causal models run as sequence classifiers and rerankers, held to
// transformers (tests/fixtures/hf/{qwen3_reranker,qwen3_reranker_seq_cls,
// llama_classifier}, tools/fixtures/make_causal_reranker_models.py):
// Qwen3-Reranker as released (its "yes" - "no" row of the LM head), its
// Qwen3ForSequenceClassification conversion, llama.cpp's GGUF of it (rank
// pooling, the two rows and the `rerank` template), and a
// LlamaForSequenceClassification of three labels; the prompt each pair is
// written into, whole and cut, as the model card's code tokenizes it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "model/model_tokenizer.hpp"
#include "model/sequence_classifier.hpp"
#include "tests/model/hf_reference_run.hpp"
#include "tests/model/stage_rows.hpp"
#include "tokenizer/rerank_prompt.hpp"

namespace troupe {
namespace {

using hf_test::fixture_dir;
using hf_test::reference;
using Json = nlohmann::json;

// transformers computes in f32 in its own order; logits of a few units, so
// 2e-5 is far below any real error (a wrong row, a missed norm, a token
// more or less moves them by 0.01 or more).
constexpr float kCausalTolerance = 2e-5f;

std::string reranker_gguf(const std::string& name) { return std::string(TROUPE_FIXTURES_DIR) + "/gguf/" + name; }

// Every input in one batch through the only stage (KV pages of 4, so every
// prompt spans several): the head's scores of each one's last token.
std::vector<std::vector<float>> classify_last(const std::shared_ptr<const Model>& model,
                                              const std::vector<std::vector<int32_t>>& inputs) {
  std::vector<test::StageInput> batch;
  for (const auto& ids : inputs) batch.push_back({.ids = ids, .n_rows = 1});
  std::vector<std::vector<float>> out = test::stage_rows(model, batch, /*block=*/4);
  for (const auto& rows : out) EXPECT_EQ(rows.size(), static_cast<size_t>(model->config().n_labels));
  return out;
}

// Each reference pair written into the model's prompt (cut to `budget` when
// given) is the card's ids, and its one logit is logit("yes") - logit("no").
void expect_reference_pairs(const std::shared_ptr<const Model>& model, const Json& ref, int32_t budget,
                            const std::string& ids_key, const std::string& logits_key) {
  const auto tokenizer = load_model_tokenizer(*model);
  std::vector<std::vector<int32_t>> inputs;
  for (size_t i = 0; i < ref["pairs"].size(); ++i) {
    std::vector<int32_t> ids =
        encode_rerank_prompt(*tokenizer, model->config().rerank_template, ref["pairs"][i][0].get<std::string>(),
                             ref["pairs"][i][1].get<std::string>(), budget);
    EXPECT_EQ(ids, ref[ids_key][i].get<std::vector<int32_t>>()) << ids_key << " " << i;
    inputs.push_back(std::move(ids));
  }
  const auto got = classify_last(model, inputs);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), 1u);
    EXPECT_NEAR(got[i][0], ref[logits_key][i].get<float>(), kCausalTolerance) << logits_key << " pair " << i;
  }
}

class CausalReranker : public ::testing::TestWithParam<const char*> {};

TEST_P(CausalReranker, MatchesTransformers) {
  const std::string name = GetParam();
  const Json ref = reference(name);
  auto model = Model::load(fixture_dir(name));
  const ModelConfig& c = model->config();
  EXPECT_TRUE(c.causal);
  EXPECT_EQ(c.n_labels, 1);
  EXPECT_EQ(c.rerank_template, kQwen3RerankTemplate);  // told by the README's heading
  EXPECT_EQ(model->weights().output.data, nullptr);    // the head replaces the LM head
  expect_reference_pairs(model, ref, 0, "token_ids", "logits");
  expect_reference_pairs(model, ref, ref["truncate"].get<int32_t>(), "truncated_token_ids", "truncated_logits");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CausalReranker, ::testing::Values("qwen3_reranker", "qwen3_reranker_seq_cls"));

TEST(CausalReranker, ReleasedHeadIsTheYesNoRow) {
  auto model = Model::load(fixture_dir("qwen3_reranker"));
  EXPECT_EQ(model->config().labels, std::vector<std::string>{"yes"});
  EXPECT_EQ(model->weights().cls_out.n_out, 1);
  EXPECT_EQ(model->weights().cls_out.type, DType::f32);
  EXPECT_EQ(model->weights().cls_out_b, nullptr);
  // A Qwen3 without the heading or the name is a language model.
  EXPECT_EQ(Model::load(fixture_dir("qwen3"))->config().n_labels, 0);
}

// llama.cpp's conversion: rank pooling, cls.output {n_embd, 2} of the "yes"
// and "no" rows (it takes a softmax over them and scores the first: the same
// sigmoid of their difference), and the prompt as the `rerank` template,
// which is the card's, as Troupe writes it for a Hugging Face directory.
TEST(CausalReranker, GgufConversionMatchesTransformers) {
  const Json ref = reference("qwen3_reranker");
  auto model = Model::load(reranker_gguf("qwen3_reranker.gguf"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.n_labels, 1);
  EXPECT_EQ(c.labels, std::vector<std::string>{"yes"});
  EXPECT_EQ(c.rerank_template, kQwen3RerankTemplate);
  expect_reference_pairs(model, ref, 0, "token_ids", "logits");
  expect_reference_pairs(model, ref, ref["truncate"].get<int32_t>(), "truncated_token_ids", "truncated_logits");
}

// A LlamaForSequenceClassification of three named labels: `score` over the
// last token, on single texts (with the tokenizer's BOS).
TEST(CausalClassifier, LogitsAndLabelsMatchTransformers) {
  const Json ref = reference("llama_classifier");
  auto model = Model::load(fixture_dir("llama_classifier"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.n_labels, 3);
  EXPECT_EQ(c.labels, ref["labels"].get<std::vector<std::string>>());
  EXPECT_TRUE(c.rerank_template.empty());
  const auto tokenizer = load_model_tokenizer(*model);
  std::vector<std::vector<int32_t>> inputs;
  for (size_t i = 0; i < ref["texts"].size(); ++i) {
    inputs.push_back(tokenizer->encode(ref["texts"][i].get<std::string>(), true, false));
    EXPECT_EQ(inputs.back(), ref["token_ids"][i].get<std::vector<int32_t>>()) << i;
  }
  const auto got = classify_last(model, inputs);
  for (size_t i = 0; i < got.size(); ++i) {
    const auto want = ref["logits"][i].get<std::vector<float>>();
    ASSERT_EQ(got[i].size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[i][k], want[k], kCausalTolerance) << i << "," << k;
  }
}

// qwen3_reranker without its README: a language model, until the load
// options name the head's tokens and the prompt (vLLM's
// classifier_from_token: ["no", "yes"] is the same head the README gives).
class TokenClassifier : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    dir_ = fs::temp_directory_path() / ("troupe_token_classifier_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
      fs::copy_file(fs::path(fixture_dir("qwen3_reranker")) / f, dir_ / f, fs::copy_options::overwrite_existing);
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

TEST_F(TokenClassifier, TwoTokensAreTheCardsHead) {
  EXPECT_EQ(Model::load(dir())->config().n_labels, 0);
  const Json ref = reference("qwen3_reranker");
  auto model = Model::load(
      dir(), {.classifier_from_token = {"no", "yes"}, .rerank_template = std::string(kQwen3RerankTemplate)});
  EXPECT_EQ(model->config().labels, std::vector<std::string>{"yes"});
  expect_reference_pairs(model, ref, 0, "token_ids", "logits");
  expect_reference_pairs(model, ref, ref["truncate"].get<int32_t>(), "truncated_token_ids", "truncated_logits");
}

TEST_F(TokenClassifier, OneTokenIsItsRow) {
  auto lm = Model::load(dir());
  auto model = Model::load(dir(), {.classifier_from_token = {"yes"}});
  const int32_t yes = hf_token_id(dir(), "yes");
  ASSERT_GE(yes, 0);
  const Weight& head = lm->weights().output;
  std::vector<float> want(static_cast<size_t>(head.n_in));
  dequantize_row(head.type, static_cast<const uint8_t*>(head.data) + yes * row_bytes(head.type, head.n_in), want.data(),
                 head.n_in);
  const Weight& row = model->weights().cls_out;
  ASSERT_EQ(row.type, DType::f32);
  ASSERT_EQ(row.n_out, 1);
  EXPECT_EQ(std::vector<float>(static_cast<const float*>(row.data), static_cast<const float*>(row.data) + row.n_in),
            want);
  EXPECT_TRUE(model->config().rerank_template.empty());  // pairs by the tokenizer's template
}

TEST_F(TokenClassifier, RefusesWhatItCannotRun) {
  auto load_error = [](const std::string& path, const ModelLoadOptions& o) -> std::string {
    try {
      Model::load(path, o);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
      return e.what();
    }
    return "loaded";
  };
  EXPECT_NE(load_error(dir(), {.classifier_from_token = {"no", "maybe"}}).find("'maybe'"), std::string::npos);
  EXPECT_NE(load_error(dir(), {.classifier_from_token = {"a", "b", "c"}}).find("one token or two"), std::string::npos);
  EXPECT_NE(load_error(dir(), {.classifier_from_token = {"yes"}, .rerank_template = "Q: {query}"}).find("{document}"),
            std::string::npos);
  // A template is for a causal reranker; tokens for a causal LM that is not one yet.
  EXPECT_NE(load_error(dir(), {.rerank_template = "{query} {document}"}).find("causal reranker"), std::string::npos);
  EXPECT_NE(load_error(fixture_dir("bert_reranker"), {.classifier_from_token = {"yes"}}).find("encoder"),
            std::string::npos);
  EXPECT_NE(load_error(fixture_dir("qwen3_reranker_seq_cls"), {.classifier_from_token = {"yes"}}).find("already"),
            std::string::npos);
  EXPECT_NE(load_error(reranker_gguf("qwen3_reranker.gguf"), {.classifier_from_token = {"no", "yes"}}).find("already"),
            std::string::npos);
  EXPECT_NE(load_error(reranker_gguf("bert_reranker.gguf"), {.rerank_template = "{query} {document}"})
                .find("causal reranker"),
            std::string::npos);
}

// A GGUF's rows are named as its vocabulary spells them; its own `rerank`
// template gives way to the options'.
TEST(CausalReranker, GgufTakesTheOptionsTemplate) {
  auto model = Model::load(reranker_gguf("qwen3_reranker.gguf"), {.rerank_template = "Q: {query}\nD: {document}"});
  EXPECT_EQ(model->config().rerank_template, "Q: {query}\nD: {document}");
}

TEST(RerankPrompt, ReplacesThePlaceholdersOnce) {
  EXPECT_EQ(render_rerank_prompt("Q: {query} D: {document} ({query})", "a{document}", "b{query}"),
            "Q: a{document} D: b{query} (a{document})");
  EXPECT_THROW(render_rerank_prompt("Q: {query}", "a", "b"), Error);
}

TEST(RerankPrompt, CutsTheDocumentAndKeepsTheClosingTurn) {
  auto model = Model::load(fixture_dir("qwen3_reranker"));
  const auto tok = load_model_tokenizer(*model);
  const std::string tmpl = model->config().rerank_template;
  const std::string doc = "Paris is the capital of France. Paris is the capital of France.";
  const std::vector<int32_t> whole = encode_rerank_prompt(*tok, tmpl, "q", doc, 0);
  const std::vector<int32_t> closing = tok->encode(tmpl.substr(tmpl.find("{document}") + 10), false, true);
  const auto budget = static_cast<int32_t>(whole.size() - 5);
  const std::vector<int32_t> cut = encode_rerank_prompt(*tok, tmpl, "q", doc, budget);
  ASSERT_EQ(cut.size(), static_cast<size_t>(budget));
  EXPECT_TRUE(std::equal(closing.rbegin(), closing.rend(), cut.rbegin()));
  EXPECT_TRUE(std::equal(cut.begin(), cut.end() - static_cast<std::ptrdiff_t>(closing.size()), whole.begin()));
  EXPECT_EQ(encode_rerank_prompt(*tok, tmpl, "q", doc, static_cast<int32_t>(whole.size())), whole);
  // A budget the closing turn alone fills leaves no room for the pair.
  EXPECT_THROW(encode_rerank_prompt(*tok, tmpl, "q", doc, static_cast<int32_t>(closing.size())), Error);
}

}  // namespace
}  // namespace troupe
