// Embedding models: the sentence-transformers directories of
// tests/fixtures/hf/{qwen3_embedding,llama_embedding_mean,bert_embedding_cls,
// bert_embedding_mean} (made and embedded by sentence-transformers itself,
// tools/fixtures/make_embedding_models.py) through a stage's hidden-row
// output and the pooler; what the files declare; the pooler's rules;
// refusals. The BERT encoders attend both ways (ModelConfig::causal false).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "model/model_tokenizer.hpp"
#include "model/pooling.hpp"
#include "safetensors_test_util.hpp"
#include "tests/model/hf_reference_run.hpp"
#include "tests/model/stage_rows.hpp"

namespace troupe {
namespace {

using hf_test::fixture_dir;
using hf_test::reference;
using Json = nlohmann::json;

// sentence-transformers computes in f32 in its own summation order; a
// normalized vector's components are below 1, so 2e-5 is far below any
// real error (a wrong row or norm moves them by 1e-2 or more).
constexpr float kEmbedTolerance = 2e-5f;

void expect_near_vector(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], kEmbedTolerance) << what << " [" << i << "]";
}

// Every text of the fixture in one batch through an embedding stage, then
// pooled: the rows each sequence needs (its last, or all of them for mean
// and CLS pooling).
std::vector<std::vector<float>> embed_all(const std::shared_ptr<const Model>& model,
                                          const std::vector<std::vector<int32_t>>& inputs, int32_t dims) {
  const ModelConfig& c = model->config();
  const Pooling pooling = c.embedding.pooling;
  std::vector<test::StageInput> batch;
  for (const auto& ids : inputs) {
    batch.push_back({.ids = ids, .n_rows = pooling == Pooling::last ? 1 : static_cast<int32_t>(ids.size())});
  }
  const std::vector<std::vector<float>> rows = test::stage_rows(model, batch);
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < batch.size(); ++i) {
    const auto n_tokens = static_cast<int32_t>(batch[i].ids.size());
    EXPECT_EQ(rows[i].size(), static_cast<size_t>(batch[i].n_rows * c.n_embd));  // hidden rows, not a head's
    EmbeddingPooler pooler(pooling, c.embedding.normalize, dims, n_tokens);
    bool done = false;
    for (int32_t j = 0; j < batch[i].n_rows; ++j) {
      const std::span<const float> r(rows[i].data() + j * c.n_embd, static_cast<size_t>(c.n_embd));
      done = pooler.add(r, n_tokens - batch[i].n_rows + j);
    }
    EXPECT_TRUE(done);
    out.push_back(pooler.result());
  }
  return out;
}

// The model's tokenizer gives the reference's ids for each text, and the
// stage and pooler its vectors.
void expect_reference_vectors(const std::shared_ptr<const Model>& model, const Json& ref, const std::string& what) {
  const auto tokenizer = load_model_tokenizer(*model);
  const auto texts = ref["texts"].get<std::vector<std::string>>();
  const auto ids = ref["token_ids"].get<std::vector<std::vector<int32_t>>>();
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(tokenizer->encode(texts[i], true, false), ids[i]) << i;
  const auto want = ref["embeddings"].get<std::vector<std::vector<float>>>();
  const auto got = embed_all(model, ids, 0);
  for (size_t i = 0; i < want.size(); ++i) expect_near_vector(got[i], want[i], what + " text " + std::to_string(i));
}

class EmbeddingFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(EmbeddingFixture, MatchesSentenceTransformers) {
  const std::string name = GetParam();
  const Json ref = reference(name);
  auto model = Model::load(fixture_dir(name));
  const ModelConfig& c = model->config();
  EXPECT_EQ(to_string(c.embedding.pooling), ref["pooling"].get<std::string>());
  EXPECT_EQ(c.embedding.normalize, ref["normalize"].get<bool>());

  // The tokenizer files: Qwen's post-processor appends <|endoftext|>, Llama's
  // prepends <s>, BERT's WordPiece wraps the text in [CLS] ... [SEP], as
  // sentence-transformers' tokenizer did.
  expect_reference_vectors(model, ref, name);
  const auto ids = ref["token_ids"].get<std::vector<std::vector<int32_t>>>();

  // Matryoshka: the leading dimensions, normalized again.
  const auto dims = ref["matryoshka_dims"].get<int32_t>();
  const auto want_short = ref["matryoshka_embeddings"].get<std::vector<std::vector<float>>>();
  if (!c.embedding.normalize) return;  // the reference's cut vectors are normalized again
  const auto got_short = embed_all(model, ids, dims);
  for (size_t i = 0; i < want_short.size(); ++i)
    expect_near_vector(got_short[i], want_short[i], "short " + std::to_string(i));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EmbeddingFixture,
                         ::testing::Values("qwen3_embedding", "llama_embedding_mean", "bert_embedding_cls",
                                           "bert_embedding_mean", "xlm_roberta_embedding_mean",
                                           "modernbert_embedding_mean", "modernbert_embedding_cls_silu",
                                           "nomic_bert_embedding_mean", "distilbert_embedding_mean"));

// A BERT directory is an encoder: bidirectional, the erf GELU where
// hidden_act is "gelu", the tanh one for "gelu_new", no head.
TEST(BertModel, LoadsAsAnEncoder) {
  auto cls = Model::load(fixture_dir("bert_embedding_cls"));
  EXPECT_EQ(cls->config().arch, "bert");
  EXPECT_FALSE(cls->config().causal);
  EXPECT_TRUE(cls->config().gelu_erf);
  EXPECT_EQ(cls->config().n_ctx_train, 128);
  EXPECT_EQ(cls->weights().output.data, nullptr);
  EXPECT_NE(cls->weights().type_embd, nullptr);
  auto mean = Model::load(fixture_dir("bert_embedding_mean"));
  EXPECT_FALSE(mean->config().gelu_erf);
  EXPECT_EQ(mean->config().head_dim, 16);
}

// Every token sees the ones after it: the first token's row changes when a
// later token does, which a causal model's never would. And a prompt is one
// step: a chunk after the first is refused, since its keys would have been
// computed without the tokens after them.
TEST(BertModel, FirstRowSeesLaterTokensAndChunksAreRefused) {
  const Json ref = reference("bert_embedding_cls");
  auto model = Model::load(fixture_dir("bert_embedding_cls"));
  std::vector<int32_t> a = ref["token_ids"][0].get<std::vector<int32_t>>();
  std::vector<int32_t> b = a;
  b[b.size() - 2] = a[1];  // a different token just before [SEP]
  ASSERT_NE(a, b);
  const auto va = embed_all(model, {a}, 0);
  const auto vb = embed_all(model, {b}, 0);
  double diff = 0;
  for (size_t i = 0; i < va[0].size(); ++i) diff = std::max(diff, double(std::abs(va[0][i] - vb[0][i])));
  // A causal model's first row would not move at all; the tiny random
  // model's near-uniform attention moves it by about 7e-4, far above f32 noise.
  EXPECT_GT(diff, 1e-4);

  CpuBackend backend({.n_threads = 1});
  ModelStage stage(model, backend, {.max_tokens = 16, .max_seqs = 1, .n_kv_blocks = 4, .embedding_output = true});
  const std::vector<int32_t> table{0, 1};
  const std::vector<int32_t> tokens(a.begin() + 4, a.end());
  const std::vector<BatchSeq> seqs{
      {.n_tokens = static_cast<int32_t>(tokens.size()), .n_past = 4, .block_table = table, .n_logits = 1}};
  std::vector<float> rows(static_cast<size_t>(model->config().n_embd));
  try {
    stage.forward({.tokens = tokens, .seqs = seqs}, nullptr, rows.data());
    FAIL() << "an encoder chunk at position 4 was run";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("in one step"), std::string::npos) << e.what();
  }
}

// config.json settings Troupe does not run are refused by name.
TEST(BertModel, RefusesWhatItCannotRun) {
  const std::string src = fixture_dir("bert_embedding_cls");
  auto refused = [&](const char* key, const Json& value, const std::string& words) {
    st_test::TempDir dir("bert_refusal");
    std::filesystem::copy(src, dir.path(), std::filesystem::copy_options::recursive);
    std::ifstream in(src + "/config.json");
    Json cfg = Json::parse(in);
    cfg[key] = value;
    st_test::write_text(dir.file("config.json"), cfg.dump());
    try {
      Model::load(dir.path().string());
      FAIL() << key << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::unsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused("hidden_act", "relu", "hidden_act 'relu'");
  refused("position_embedding_type", "relative_key", "position_embedding_type 'relative_key'");
  refused("is_decoder", true, "is_decoder");
}

// llama.cpp's converter made the GGUF from the same directory: it wrote
// qwen3.pooling_type from modules.json and add_eos_token from the
// post-processor; GGUF vectors are normalized.
TEST(EmbeddingModel, GgufConversionMatchesSentenceTransformers) {
  const Json ref = reference("qwen3_embedding");
  auto model = Model::load(std::string(TROUPE_FIXTURES_DIR) + "/gguf/qwen3_embedding.gguf");
  EXPECT_EQ(model->config().embedding.pooling, Pooling::last);
  EXPECT_TRUE(model->config().embedding.normalize);
  expect_reference_vectors(model, ref, "gguf");
}

// llama.cpp's converter of the BERT fixture: its "bert" architecture and
// WordPiece vocabulary in phantom-space spelling, lower-casing
// (tokenizer.ggml.normalizer.lowercase), pooling_type cls.
TEST(EmbeddingModel, GgufBertConversionMatchesSentenceTransformers) {
  const Json ref = reference("bert_embedding_cls");
  auto model = Model::load(std::string(TROUPE_FIXTURES_DIR) + "/gguf/bert_embedding_cls.gguf");
  EXPECT_EQ(model->config().arch, "bert");
  EXPECT_FALSE(model->config().causal);
  EXPECT_EQ(model->config().embedding.pooling, Pooling::cls);
  EXPECT_EQ(model->vocab().model, "bert");
  expect_reference_vectors(model, ref, "gguf bert");
  // The WordPiece spelling comes back: pieces glue, words get spaces.
  const auto tokenizer = load_model_tokenizer(*model);
  const auto ids = ref["token_ids"][0].get<std::vector<int32_t>>();
  EXPECT_EQ(tokenizer->decode(ids, /*skip_special=*/true), "the quick brown fox jumps over the lazy dog.");
}

// llama.cpp's converter of the NomicBERT fixture (nomic's published config):
// "nomic-bert", the trained context, the WordPiece vocabulary, mean pooling.
TEST(EmbeddingModel, GgufNomicBertConversionMatchesSentenceTransformers) {
  const Json ref = reference("nomic_bert_embedding_mean");
  auto model = Model::load(std::string(TROUPE_FIXTURES_DIR) + "/gguf/nomic_bert_embedding_mean.gguf");
  EXPECT_EQ(model->config().arch, "nomic-bert");
  EXPECT_FALSE(model->config().causal);
  EXPECT_EQ(model->config().n_ctx_train, 2048);
  EXPECT_EQ(model->config().rope_theta, 3000.0f);
  EXPECT_EQ(model->config().embedding.pooling, Pooling::mean);
  EXPECT_EQ(model->vocab().model, "bert");
  expect_reference_vectors(model, ref, "gguf nomic-bert");
}

// Saved from Qwen3Model: tensors without "model.", no lm_head (not tied).
TEST(EmbeddingModel, HeadlessCheckpointRunsOnlyForEmbeddings) {
  auto model = Model::load(fixture_dir("qwen3_embedding"));
  EXPECT_EQ(model->weights().output.data, nullptr);
  CpuBackend backend({.n_threads = 1});
  try {
    ModelStage stage(model, backend, {.max_tokens = 16, .max_seqs = 1, .n_kv_blocks = 4});
    FAIL() << "a generating stage over a headless model";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("no output head"), std::string::npos) << e.what();
  }
}

// sentence-transformers 2-5 write one boolean per mode and name modules
// sentence_transformers.models.*; the reader takes both forms.
class StDir {
 public:
  StDir() : dir_("st_files") {}
  void modules(const Json& list) { st_test::write_text(dir_.file("modules.json"), list.dump()); }
  void pooling(const Json& cfg) {
    std::filesystem::create_directories(dir_.path() / "1_Pooling");
    st_test::write_text((dir_.path() / "1_Pooling" / "config.json").string(), cfg.dump());
  }
  std::string path() const { return dir_.path().string(); }

 private:
  st_test::TempDir dir_;
};

Json classic_modules(bool normalize, const char* extra = nullptr) {
  Json m = Json::array(
      {{{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}},
       {{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", "sentence_transformers.models.Pooling"}}});
  if (normalize)
    m.push_back(
        {{"idx", 2}, {"name", "2"}, {"path", "2_Normalize"}, {"type", "sentence_transformers.models.Normalize"}});
  if (extra != nullptr) m.push_back({{"idx", 3}, {"name", "3"}, {"path", "3_X"}, {"type", extra}});
  return m;
}

Json flags(const char* on) {
  Json j{{"word_embedding_dimension", 64},
         {"pooling_mode_cls_token", false},
         {"pooling_mode_mean_tokens", false},
         {"pooling_mode_max_tokens", false},
         {"pooling_mode_mean_sqrt_len_tokens", false},
         {"pooling_mode_weightedmean_tokens", false},
         {"pooling_mode_lasttoken", false},
         {"include_prompt", true}};
  if (on != nullptr) j[on] = true;
  return j;
}

TEST(SentenceTransformers, ReadsTheClassicFiles) {
  StDir d;
  d.modules(classic_modules(true));
  d.pooling(flags("pooling_mode_lasttoken"));
  EmbeddingSpec s = read_sentence_transformers(d.path());
  EXPECT_EQ(s.pooling, Pooling::last);
  EXPECT_TRUE(s.normalize);
  d.modules(classic_modules(false));
  d.pooling(flags("pooling_mode_mean_tokens"));
  s = read_sentence_transformers(d.path());
  EXPECT_EQ(s.pooling, Pooling::mean);
  EXPECT_FALSE(s.normalize);
}

// CLS is read as any mode; only an encoder may pool by it.
TEST(SentenceTransformers, ClsPoolingNeedsAnEncoder) {
  StDir d;
  d.modules(classic_modules(true));
  d.pooling(flags("pooling_mode_cls_token"));
  EXPECT_EQ(read_sentence_transformers(d.path()).pooling, Pooling::cls);
  EXPECT_NO_THROW(check_model_pooling(Pooling::cls, /*causal=*/false, "m"));
  EXPECT_NO_THROW(check_model_pooling(Pooling::mean, /*causal=*/true, "m"));
  try {
    check_model_pooling(Pooling::cls, /*causal=*/true, "m");
    FAIL() << "CLS pooling of a causal model";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("needs an encoder"), std::string::npos) << e.what();
  }
}

TEST(SentenceTransformers, NoModulesFileIsAGenerator) {
  st_test::TempDir dir("st_none");
  EXPECT_EQ(read_sentence_transformers(dir.path().string()).pooling, Pooling::none);
}

void expect_refused(const StDir& d, Errc code, const std::string& words) {
  try {
    read_sentence_transformers(d.path());
    FAIL() << "accepted; expected: " << words;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(SentenceTransformers, RefusesWhatItCannotRun) {
  StDir d;
  d.modules(classic_modules(true));
  d.pooling(flags("pooling_mode_max_tokens"));
  expect_refused(d, Errc::unsupported, "pooling mode 'max'");
  d.pooling(flags(nullptr));
  expect_refused(d, Errc::bad_format, "names no pooling mode");
  Json two = flags("pooling_mode_lasttoken");
  two["pooling_mode_mean_tokens"] = true;
  d.pooling(two);
  expect_refused(d, Errc::unsupported, "more than one pooling mode");
  Json no_prompt = flags("pooling_mode_mean_tokens");
  no_prompt["include_prompt"] = false;
  d.pooling(no_prompt);
  expect_refused(d, Errc::unsupported, "include_prompt false");
  d.pooling(flags("pooling_mode_lasttoken"));
  d.modules(classic_modules(true, "sentence_transformers.models.Dense"));
  expect_refused(d, Errc::unsupported, "sentence_transformers.models.Dense");
  st_test::write_text(d.path() + "/modules.json", "{not json");
  expect_refused(d, Errc::bad_format, "modules.json");
}

TEST(GgufPooling, LlamaCppsEnum) {
  EXPECT_EQ(gguf_pooling(0, "f.gguf"), Pooling::none);
  EXPECT_EQ(gguf_pooling(1, "f.gguf"), Pooling::mean);
  EXPECT_EQ(gguf_pooling(2, "f.gguf"), Pooling::cls);
  EXPECT_EQ(gguf_pooling(3, "f.gguf"), Pooling::last);
  EXPECT_THROW(gguf_pooling(4, "f.gguf"), Error);  // rank: a classifier's
  EXPECT_THROW(gguf_pooling(9, "f.gguf"), Error);
}

TEST(EmbeddingPooler, MeanStartsOverWhenASequenceIsRecomputed) {
  EmbeddingPooler p(Pooling::mean, false, 0, 3);
  const std::vector<float> a{1, 2}, b{3, 4}, c{5, 6};
  EXPECT_FALSE(p.add(a, 0));
  EXPECT_FALSE(p.add(a, 1));  // preempted here, then recomputed from the start
  EXPECT_FALSE(p.add(a, 0));
  EXPECT_FALSE(p.add(b, 1));
  EXPECT_TRUE(p.add(c, 2));
  EXPECT_EQ(p.result(), (std::vector<float>{3, 4}));
}

TEST(EmbeddingPooler, LastTruncatesThenNormalizes) {
  EmbeddingPooler p(Pooling::last, true, 2, 2);
  EXPECT_FALSE(p.add(std::vector<float>{9, 9, 9}, 0));
  EXPECT_TRUE(p.add(std::vector<float>{3, 4, 100}, 1));
  const std::vector<float> v = p.result();
  ASSERT_EQ(v.size(), 2u);
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
}

TEST(EmbeddingPooler, ClsKeepsTheFirstRow) {
  EmbeddingPooler p(Pooling::cls, false, 0, 3);
  EXPECT_FALSE(p.add(std::vector<float>{1, 2}, 0));
  EXPECT_FALSE(p.add(std::vector<float>{3, 4}, 1));
  EXPECT_TRUE(p.add(std::vector<float>{5, 6}, 2));
  EXPECT_EQ(p.result(), (std::vector<float>{1, 2}));
}

TEST(EmbeddingPooler, RefusesNoPoolingAndEmptyInputs) {
  EXPECT_THROW(EmbeddingPooler(Pooling::none, true, 0, 3), Error);
  EXPECT_THROW(EmbeddingPooler(Pooling::last, true, 0, 0), Error);
}

}  // namespace
}  // namespace troupe
