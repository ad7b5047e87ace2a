// NomicBERT (model/arch_nomic_bert.cpp, model/gguf_nomic_bert.cpp) beyond
// what the sentence-transformers and transformers references check
// (tests/fixtures/hf/nomic_bert_*, tools/fixtures/make_nomic_bert_models.py;
// embedding_model_test.cpp and reranker_model_test.cpp run them): nomic's
// published config spelling and transformers' read the same, the trained
// context, and what Troupe refuses by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.hpp"
#include "model/model.hpp"
#include "tests/model/edited_fixture.hpp"
#include "tests/model/hf_reference_run.hpp"

namespace troupe {
namespace {

using hf_test::fixture_dir;
using test::EditedFixture;
using Json = nlohmann::json;

constexpr const char* kFixture = "nomic_bert_embedding_mean";  // nomic's spelling, as published

// The same network in transformers' NomicBertConfig spelling.
void to_transformers_spelling(Json& c) {
  Json t{{"architectures", {"NomicBertModel"}},
         {"model_type", "nomic_bert"},
         {"vocab_size", c["vocab_size"]},
         {"hidden_size", c["n_embd"]},
         {"num_hidden_layers", c["n_layer"]},
         {"num_attention_heads", c["n_head"]},
         {"intermediate_size", c["n_inner"]},
         {"max_position_embeddings", c["max_trained_positions"]},
         {"layer_norm_eps", c["layer_norm_epsilon"]},
         {"hidden_act", "silu"},
         {"type_vocab_size", c["type_vocab_size"]},
         {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", c["rotary_emb_base"]}}}};
  c = t;
}

TEST(NomicBert, ReadsNomicsPublishedConfig) {
  auto model = Model::load(fixture_dir(kFixture));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "nomic-bert");
  EXPECT_FALSE(c.causal);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_ff, 96);
  EXPECT_EQ(c.n_ctx_train, 2048);  // max_trained_positions, not n_positions 8192
  EXPECT_EQ(c.rope_theta, 3000.0f);
  EXPECT_EQ(c.n_rot, c.head_dim);
  EXPECT_EQ(c.rope_layout, kernels::RopeLayout::neox);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-12f);
  EXPECT_EQ(model->weights().pos_embd.data, nullptr);  // rotary: no position table
  EXPECT_NE(model->weights().type_embd, nullptr);
}

TEST(NomicBert, TransformersSpellingReadsTheSame) {
  const EditedFixture native(kFixture, to_transformers_spelling);
  const ModelConfig a = Model::load(native.dir())->config();
  const ModelConfig b = Model::load(fixture_dir(kFixture))->config();
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.n_vocab, b.n_vocab);
  EXPECT_EQ(a.n_embd, b.n_embd);
  EXPECT_EQ(a.n_layer, b.n_layer);
  EXPECT_EQ(a.n_head, b.n_head);
  EXPECT_EQ(a.n_ff, b.n_ff);
  EXPECT_EQ(a.n_ctx_train, b.n_ctx_train);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.n_rot, b.n_rot);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.n_token_types, b.n_token_types);
  // NomicBertConfig's base where the file writes none is 1000, nomic's.
  const EditedFixture bare(kFixture, [](Json& c) {
    to_transformers_spelling(c);
    c.erase("rope_parameters");
  });
  EXPECT_EQ(Model::load(bare.dir())->config().rope_theta, 1000.0f);
}

TEST(NomicBert, RefusesWhatItDoesNotRun) {
  auto refused = [](const char* key, const Json& value, const std::string& why) {
    const std::string what = test::refusal(kFixture, [&](Json& c) { c[key] = value; });
    EXPECT_NE(what.find(why), std::string::npos) << key << ": " << what;
  };
  refused("moe_every_n_layers", 2, "nomic-embed-text-v2-moe");
  refused("activation_function", "gelu", "activation_function 'gelu'");
  refused("prenorm", true, "prenorm");
  refused("qkv_proj_bias", true, "qkv_proj_bias");
  refused("mlp_fc1_bias", true, "mlp_fc1_bias");
  refused("rotary_emb_interleaved", true, "rotary_emb_interleaved");
  refused("rotary_emb_fraction", 0.5, "rotary_emb_fraction");
  refused("rotary_scaling_factor", 2.0, "rotary_scaling_factor");
  const std::string act = test::refusal(kFixture, [](Json& c) {
    to_transformers_spelling(c);
    c["hidden_act"] = "gelu";
  });
  EXPECT_NE(act.find("hidden_act 'gelu'"), std::string::npos) << act;
}

}  // namespace
}  // namespace troupe
