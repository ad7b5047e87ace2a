// Cross-encoder rerankers: the CrossEncoder directories of
// tests/fixtures/hf/{bert,roberta,xlm_roberta}_reranker (made and scored by
// sentence-transformers' CrossEncoder itself,
// tools/fixtures/make_reranker_models.py) and llama.cpp's conversion of
// the BERT one: the tokenizer's pair template (ids and token types), its
// longest_first truncation, and the classifier head's logits through a
// stage, held to the reference.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "model/model_tokenizer.hpp"
#include "tests/model/hf_reference_run.hpp"
#include "tests/model/stage_rows.hpp"

namespace troupe {
namespace {

using hf_test::fixture_dir;
using hf_test::reference;
using Json = nlohmann::json;

// CrossEncoder computes in f32 in its own summation order; logits of a few
// units, so 2e-5 is far below any real error (a wrong token type or a
// missing pooler moves them by 0.1 or more).
constexpr float kRerankTolerance = 2e-5f;

// The token types a pair's ids have: 0 before type1_from, 1 from it on.
std::vector<int32_t> types_of(const Tokenizer::Pair& p) {
  std::vector<int32_t> types(p.ids.size(), 0);
  for (size_t i = p.type1_from < 0 ? types.size() : static_cast<size_t>(p.type1_from); i < types.size(); ++i) {
    types[i] = 1;
  }
  return types;
}

// Every pair in one batch through the last (and only) stage: each row's
// classifier logits, of which the [CLS] row's are the pair's.
std::vector<std::vector<float>> classify_all(const std::shared_ptr<const Model>& model,
                                             const std::vector<Tokenizer::Pair>& pairs) {
  const ModelConfig& c = model->config();
  std::vector<test::StageInput> batch;
  for (const auto& p : pairs) {
    batch.push_back({.ids = p.ids,
                     .n_rows = static_cast<int32_t>(p.ids.size()),
                     .type1_from = c.n_token_types >= 2 ? p.type1_from : -1});
  }
  std::vector<std::vector<float>> out = test::stage_rows(model, batch);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].size(), batch[i].ids.size() * static_cast<size_t>(c.n_labels));  // the head's rows
    out[i].resize(static_cast<size_t>(c.n_labels));                                   // position 0: [CLS]
  }
  return out;
}

// The model's tokenizer joins each reference pair as CrossEncoder's did
// (cut to `budget` tokens when given), and the stage scores them so.
void expect_reference_pairs(const std::shared_ptr<const Model>& model, const Json& ref, int32_t budget,
                            const std::string& ids_key, const std::string& types_key, const std::vector<float>& want) {
  const auto tokenizer = load_model_tokenizer(*model);
  std::vector<Tokenizer::Pair> pairs;
  for (size_t i = 0; i < ref["pairs"].size(); ++i) {
    const Tokenizer::Pair p =
        tokenizer->encode_pair(ref["pairs"][i][0].get<std::string>(), ref["pairs"][i][1].get<std::string>(), budget);
    EXPECT_EQ(p.ids, ref[ids_key][i].get<std::vector<int32_t>>()) << ids_key << " " << i;
    if (model->config().n_token_types >= 2) {
      EXPECT_EQ(types_of(p), ref[types_key][i].get<std::vector<int32_t>>()) << types_key << " " << i;
    }
    pairs.push_back(p);
  }
  const std::vector<std::vector<float>> got = classify_all(model, pairs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i][0], want[i], kRerankTolerance) << ids_key << " pair " << i;
}

class RerankerFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(RerankerFixture, MatchesCrossEncoder) {
  const std::string name = GetParam();
  const Json ref = reference(name);
  auto model = Model::load(fixture_dir(name));
  const ModelConfig& c = model->config();
  EXPECT_FALSE(c.causal);
  EXPECT_EQ(c.n_labels, 1);
  EXPECT_TRUE(c.embedding.score_sigmoid);  // CrossEncoder's Sigmoid
  expect_reference_pairs(model, ref, 0, "token_ids", "token_type_ids", ref["logits"].get<std::vector<float>>());
  // Cut to `truncate` tokens, the longer text first (CrossEncoder's max_length).
  expect_reference_pairs(model, ref, ref["truncate"].get<int32_t>(), "truncated_token_ids", "truncated_token_type_ids",
                         ref["truncated_logits"].get<std::vector<float>>());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RerankerFixture,
                         ::testing::Values("bert_reranker", "roberta_reranker", "xlm_roberta_reranker",
                                           "modernbert_reranker"));

TEST(Reranker, ReadsWhatTheCheckpointDeclares) {
  auto bert = Model::load(fixture_dir("bert_reranker"));
  EXPECT_EQ(bert->config().arch, "bert");
  EXPECT_EQ(bert->config().n_token_types, 2);
  EXPECT_NE(bert->weights().cls_dense.data, nullptr);  // BERT's pooler
  EXPECT_EQ(Model::load(fixture_dir("xlm_roberta_reranker"))->config().arch, "xlm-roberta");
  auto roberta = Model::load(fixture_dir("roberta_reranker"));
  EXPECT_EQ(roberta->config().arch, "roberta");
  EXPECT_EQ(roberta->config().n_token_types, 1);
  // Positions count from pad_token_id + 1: two of the table's 130 rows are never read.
  EXPECT_EQ(roberta->config().n_ctx_train, 128);
  // The pair templates: BERT's [CLS] A [SEP] B [SEP] with B of type 1;
  // RoBERTa's <s> A </s></s> B </s>, all of type 0.
  const auto bt = load_model_tokenizer(*bert);
  EXPECT_EQ(bt->pair_special_count(), 3);
  const auto rt = load_model_tokenizer(*roberta);
  EXPECT_EQ(rt->pair_special_count(), 4);
  EXPECT_EQ(rt->encode_pair("a", "b").type1_from, -1);
}

// llama.cpp's converter keeps the classifier (as cls.output) and drops
// BERT's pooler: the file computes classifier(hidden[CLS]), which
// reference.json's gguf_logits hold (transformers' BertModel and the
// checkpoint's classifier). Token types are BERT's, as the checkpoint was
// trained with.
TEST(Reranker, GgufConversionMatchesItsOwnHead) {
  const Json ref = reference("bert_reranker");
  auto model = Model::load(std::string(TROUPE_FIXTURES_DIR) + "/gguf/bert_reranker.gguf");
  EXPECT_EQ(model->config().n_labels, 1);
  EXPECT_EQ(model->weights().cls_dense.data, nullptr);
  expect_reference_pairs(model, ref, 0, "token_ids", "token_type_ids", ref["gguf_logits"].get<std::vector<float>>());
}

// RoBERTa's conversion is exact: the position table cut at pad_token_id +
// 1, classifier.dense as `cls`, out_proj as `cls.output`, its byte-level
// BPE as a "gpt2" vocabulary; the pair as llama.cpp's rerank joins it
// (add_sep): <s> A </s></s> B </s>.
TEST(Reranker, GgufRobertaConversionMatchesCrossEncoder) {
  const Json ref = reference("roberta_reranker");
  auto model = Model::load(std::string(TROUPE_FIXTURES_DIR) + "/gguf/roberta_reranker.gguf");
  EXPECT_EQ(model->config().n_labels, 1);
  EXPECT_EQ(model->config().n_ctx_train, 128);
  EXPECT_NE(model->weights().cls_dense.data, nullptr);
  EXPECT_EQ(model->vocab().model, "gpt2");
  expect_reference_pairs(model, ref, 0, "token_ids", "token_type_ids", ref["logits"].get<std::vector<float>>());
  expect_reference_pairs(model, ref, ref["truncate"].get<int32_t>(), "truncated_token_ids", "truncated_token_type_ids",
                         ref["truncated_logits"].get<std::vector<float>>());
}

// ModernBERT's conversion ("modern-bert") is exact: attn_qkv and ffn_up as
// the fused matrices, the local window and RoPE bases as keys, cls, cls.norm
// and cls.output as the head, [CLS] and [SEP] as the vocabulary's BOS and
// EOS, so pairs join as [CLS] A [SEP] B [SEP].
TEST(Reranker, GgufModernBertConversionMatchesCrossEncoder) {
  const Json ref = reference("modernbert_reranker");
  auto model = Model::load(std::string(TROUPE_FIXTURES_DIR) + "/gguf/modernbert_reranker.gguf");
  const ModelConfig& c = model->config();
  const auto hf_model = Model::load(fixture_dir("modernbert_reranker"));
  const ModelConfig& hf = hf_model->config();
  EXPECT_EQ(c.arch, "modernbert");
  EXPECT_EQ(c.local_layers, hf.local_layers);
  EXPECT_EQ(c.sliding_window, hf.sliding_window);
  EXPECT_EQ(c.rope_local_theta, hf.rope_local_theta);
  EXPECT_EQ(c.cls_act, ModelConfig::ClassifierAct::gelu_norm);
  expect_reference_pairs(model, ref, 0, "token_ids", "token_type_ids", ref["logits"].get<std::vector<float>>());
  expect_reference_pairs(model, ref, ref["truncate"].get<int32_t>(), "truncated_token_ids", "truncated_token_type_ids",
                         ref["truncated_logits"].get<std::vector<float>>());
}

// A sequence classifier of three named labels (id2label), on single texts.
// The reference without the pairs whose text holds `token` (a special
// token a conversion left out).
Json without_pairs_holding(const Json& ref, const std::string& token) {
  Json out = ref;
  for (const char* key : {"pairs", "token_ids", "token_type_ids", "logits", "truncated_token_ids",
                          "truncated_token_type_ids", "truncated_logits"}) {
    out[key] = Json::array();
  }
  for (size_t i = 0; i < ref["pairs"].size(); ++i) {
    if (ref["pairs"][i].dump().find(token) != std::string::npos) continue;
    for (const char* key : {"pairs", "token_ids", "token_type_ids", "logits", "truncated_token_ids",
                            "truncated_token_type_ids", "truncated_logits"}) {
      out[key].push_back(ref[key][i]);
    }
  }
  return out;
}

// XLM-RoBERTa from GGUF: llama.cpp's "t5" vocabulary (the SentencePiece
// pieces, scores and Precompiled charsmap, converted from the model the
// tokenizer was made from) read as the checkpoint's tokenizer.json reads
// it. The converter leaves <mask> out of the vocabulary, so the pair that
// holds it is not compared.
TEST(Reranker, GgufXlmRobertaConversionMatchesCrossEncoder) {
  const Json ref = without_pairs_holding(reference("xlm_roberta_reranker"), "<mask>");
  ASSERT_GE(ref["pairs"].size(), 4u);
  auto model = Model::load(std::string(TROUPE_FIXTURES_DIR) + "/gguf/xlm_roberta_reranker.gguf");
  EXPECT_EQ(model->vocab().model, "t5");
  EXPECT_FALSE(model->vocab().precompiled_charsmap.empty());
  EXPECT_EQ(model->config().n_labels, 1);
  expect_reference_pairs(model, ref, 0, "token_ids", "token_type_ids", ref["logits"].get<std::vector<float>>());
  expect_reference_pairs(model, ref, ref["truncate"].get<int32_t>(), "truncated_token_ids", "truncated_token_type_ids",
                         ref["truncated_logits"].get<std::vector<float>>());
}

class ClassifierFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(ClassifierFixture, LogitsAndLabelsMatchTransformers) {
  const Json ref = reference(GetParam());
  auto model = Model::load(fixture_dir(GetParam()));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.labels, ref["labels"].get<std::vector<std::string>>());
  EXPECT_EQ(c.n_labels, static_cast<int32_t>(c.labels.size()));
  EXPECT_FALSE(c.multi_label);
  const auto tokenizer = load_model_tokenizer(*model);
  std::vector<Tokenizer::Pair> inputs;
  for (size_t i = 0; i < ref["texts"].size(); ++i) {
    const auto ids = tokenizer->encode(ref["texts"][i].get<std::string>(), true, false);
    EXPECT_EQ(ids, ref["token_ids"][i].get<std::vector<int32_t>>()) << i;
    inputs.push_back({.ids = ids, .type1_from = -1});
  }
  const std::vector<std::vector<float>> got = classify_all(model, inputs);
  for (size_t i = 0; i < got.size(); ++i) {
    const auto want = ref["logits"][i].get<std::vector<float>>();
    ASSERT_EQ(got[i].size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(got[i][k], want[k], kRerankTolerance) << i << "," << k;
  }
}

// BERT's head (pooler dense + tanh; NomicBERT's too), ModernBERT's (dense, GELU,
// LayerNorm) and DistilBERT's (pre_classifier, ReLU).
INSTANTIATE_TEST_SUITE_P(Fixtures, ClassifierFixture,
                         ::testing::Values("bert_classifier", "modernbert_classifier", "nomic_bert_classifier",
                                           "distilbert_classifier", "modernbert_classifier_mean"));

TEST(Reranker, TokenTypeOneNeedsASecondRow) {
  auto model = Model::load(fixture_dir("roberta_reranker"));
  CpuBackend backend({.n_threads = 1});
  ModelStage stage(model, backend, {.max_tokens = 8, .max_seqs = 1, .n_kv_blocks = 4, .embedding_output = true});
  const std::vector<int32_t> tokens = {0, 5, 2, 2, 6, 2};
  const std::vector<int32_t> table = {0};
  const std::vector<BatchSeq> seqs = {
      {.n_tokens = 6, .n_past = 0, .block_table = table, .n_logits = 6, .type1_from = 4}};
  std::vector<float> out(6);
  EXPECT_THROW(stage.forward({.tokens = tokens, .seqs = seqs}, nullptr, out.data()), Error);
}

TEST(Tokenizer, TruncatePairIsLongestFirst) {
  auto cut = [](size_t a, size_t b, size_t budget) {
    std::vector<int32_t> x(a, 1), y(b, 2);
    Tokenizer::truncate_pair(x, y, budget);
    return std::pair{x.size(), y.size()};
  };
  EXPECT_EQ(cut(3, 4, 10), (std::pair<size_t, size_t>{3, 4}));   // fits
  EXPECT_EQ(cut(3, 20, 10), (std::pair<size_t, size_t>{3, 7}));  // the longer one gives up its tail
  EXPECT_EQ(cut(20, 3, 10), (std::pair<size_t, size_t>{7, 3}));
  EXPECT_EQ(cut(8, 20, 11), (std::pair<size_t, size_t>{5, 6}));  // both past half: the longer keeps the odd one
  EXPECT_EQ(cut(20, 8, 11), (std::pair<size_t, size_t>{6, 5}));
  EXPECT_EQ(cut(30, 30, 0), (std::pair<size_t, size_t>{0, 0}));
}

}  // namespace
}  // namespace troupe
