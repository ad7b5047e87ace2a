// Architecture variants beside the tiny Hugging Face fixtures
// (tests/fixtures/hf/<arch>/): the same weights with one config key
// changed, or in another checkpoint layout, held to the transformers logits
// the fixture script recorded for that variant on those weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "model/safetensors.hpp"
#include "safetensors_test_util.hpp"
#include "tests/exact_math.hpp"
#include "tests/model/hf_reference_run.hpp"

namespace troupe {
namespace {

using namespace hf_test;  // NOLINT: the fixture helpers

// The fixture's weights beside its config.json as `edit` leaves it, in dir.
std::shared_ptr<const Model> load_edited(const std::string& arch, const st_test::TempDir& dir,
                                         const std::function<void(nlohmann::json&)>& edit,
                                         const ModelLoadOptions& options = {}) {
  std::filesystem::copy(fixture_dir(arch) + "/model.safetensors", dir.file("model.safetensors"));
  std::ifstream in(fixture_dir(arch) + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  edit(cfg);
  st_test::write_text(dir.file("config.json"), cfg.dump());
  return Model::load(dir.path().string(), options);
}

// Qwen3-MoE with norm_topk_prob off (transformers' default): the gate
// weights are the chosen experts' shares of a softmax over all of them.
TEST(HfVariants, Qwen3MoeWithoutTopKRenormalization) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_qwen3moe_unnormalized");
  const auto model = load_edited("qwen3moe", dir, [](nlohmann::json& c) { c["norm_topk_prob"] = false; });
  EXPECT_FALSE(model->config().expert_weights_norm);
  const auto ref = reference("qwen3moe");
  expect_matches(ref, run_reference_batch(model, ref, 1), model->config().n_vocab, kTolerance, "last_logits_unnormalized");
}

// gpt-oss's config as OpenAI published it: rope_theta beside rope_scaling,
// experts_per_token, no layer_types (every other layer local, layer 0
// first) and no swiglu_alpha (1.702). The same model, the same logits.
TEST(HfVariants, GptOssPublishedConfigSpelling) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_gpt_oss_published");
  const auto model = load_edited("gpt_oss", dir, [](nlohmann::json& c) {
    nlohmann::json rope = c["rope_parameters"];
    c.erase("rope_parameters");
    c["rope_theta"] = rope["rope_theta"];
    rope.erase("rope_theta");
    c["rope_scaling"] = rope;
    c["experts_per_token"] = c["num_experts_per_tok"];
    c.erase("num_experts_per_tok");
    c.erase("layer_types");
    c.erase("swiglu_alpha");
  });
  const ModelConfig& mc = model->config();
  EXPECT_EQ(mc.window(0), 4);
  EXPECT_EQ(mc.window(1), 0);
  EXPECT_FLOAT_EQ(mc.expert_swiglu_alpha, 1.702f);
  EXPECT_EQ(mc.n_expert_used, 2);
  const auto ref = reference("gpt_oss");
  expect_reference_batch(model, ref);
}

// OLMo 3's config as the published models spell it: rope_theta beside
// rope_scaling (the global layers' YaRN), no layer_types (every fourth layer
// global). The same model, the same logits (the fixture script checked that
// transformers agrees).
TEST(HfVariants, Olmo3PublishedConfigSpelling) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_olmo3_published");
  const auto model = load_edited("olmo3", dir, [](nlohmann::json& c) {
    nlohmann::json rope = c["rope_parameters"]["full_attention"];
    c.erase("rope_parameters");
    c.erase("layer_types");
    c["rope_theta"] = rope["rope_theta"];
    rope.erase("rope_theta");
    c["rope_scaling"] = rope;
  });
  const ModelConfig& mc = model->config();
  EXPECT_EQ(mc.local_layers, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(mc.window(0), 4);
  EXPECT_EQ(mc.window(3), 0);
  EXPECT_FLOAT_EQ(mc.rope_local_theta, 500000.0f);
  EXPECT_FALSE(mc.rope_freq_factors.empty());  // YaRN, for the global layer
  const auto ref = reference("olmo3");
  expect_reference_batch(model, ref);
}

// An OLMo 2 config naming a window is refused: Olmo2Config has none, so the
// file is not the model it says it is.
TEST(HfVariants, Olmo2WithAWindowIsRefused) {
  st_test::TempDir dir("hf_olmo2_window");
  try {
    load_edited("olmo2", dir, [](nlohmann::json& c) { c["sliding_window"] = 4; });
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("Olmo3ForCausalLM"), std::string::npos) << e.what();
  }
}

// GLM-4.5's weights routed as DeepSeek-V3 routes: 4 groups of 2 experts,
// the best 2 groups (by their two best biased scores) kept, the top 2
// experts chosen among those. transformers' logits for that config.
TEST(HfVariants, Glm4MoeGroupLimitedRouting) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_glm4_moe_grouped");
  const auto model = load_edited("glm4_moe", dir, [](nlohmann::json& c) {
    c["n_group"] = 4;
    c["topk_group"] = 2;
  });
  EXPECT_EQ(model->config().n_expert_groups, 4);
  EXPECT_EQ(model->config().n_expert_groups_used, 2);
  const auto ref = reference("glm4_moe");
  const auto greedy = ref["greedy_grouped"].get<std::vector<std::vector<int32_t>>>();
  const BatchRun run = run_reference_batch(model, ref, static_cast<int64_t>(greedy[0].size()));
  expect_matches(ref, run, model->config().n_vocab, kTolerance, "last_logits_grouped");
  EXPECT_EQ(run.greedy, greedy);
}

// Groups that cannot hold the experts a token needs are refused.
TEST(HfVariants, Glm4MoeGroupsThatCannotRouteAreRefused) {
  st_test::TempDir dir("hf_glm4_moe_bad_groups");
  try {
    load_edited("glm4_moe", dir, [](nlohmann::json& c) {
      c["n_group"] = 8;  // groups of one expert
      c["topk_group"] = 1;
    });
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_format);
    EXPECT_NE(std::string(e.what()).find("n_group"), std::string::npos) << e.what();
  }
}

// EXAONE 4 without a window, as the 1.2B model is configured: every layer
// global and roped. transformers' logits for the same weights.
TEST(HfVariants, Exaone4WithoutAWindowRopesEveryLayer) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_exaone4_no_window");
  const auto model = load_edited("exaone4", dir, [](nlohmann::json& c) {
    c["sliding_window"] = nullptr;
    c["layer_types"] = {"full_attention", "full_attention", "full_attention", "full_attention"};
  });
  EXPECT_TRUE(model->config().local_layers.empty());
  EXPECT_TRUE(model->config().nope_layers.empty());
  const auto ref = reference("exaone4");
  expect_matches(ref, run_reference_batch(model, ref, 1), model->config().n_vocab, kTolerance, "last_logits_no_window");
}

// The published 32B config spells the layer kinds as a string ("LLLG").
TEST(HfVariants, Exaone4PatternAsAString) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_exaone4_lllg");
  const auto model = load_edited("exaone4", dir, [](nlohmann::json& c) {
    c.erase("layer_types");
    c["sliding_window_pattern"] = "LLLG";
  });
  EXPECT_EQ(model->config().local_layers, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(model->config().nope_layers, (std::vector<uint8_t>{0, 0, 0, 1}));
  expect_reference_batch(model, reference("exaone4"));
}

// DeepSeek-V2's group-limited routing on the same weights: 4 groups of 2
// experts, only the best group (by its best softmax score) kept.
TEST(HfVariants, DeepseekV2GroupLimitedRouting) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_deepseek_v2_grouped");
  const auto model = load_edited("deepseek_v2", dir, [](nlohmann::json& c) {
    c["topk_method"] = "group_limited_greedy";
    c["n_group"] = 4;
    c["topk_group"] = 1;
  });
  EXPECT_EQ(model->config().n_expert_groups, 4);
  const auto ref = reference("deepseek_v2");
  const auto greedy = ref["greedy_grouped"].get<std::vector<std::vector<int32_t>>>();
  const BatchRun run = run_reference_batch(model, ref, static_cast<int64_t>(greedy[0].size()));
  expect_matches(ref, run, model->config().n_vocab, kTolerance, "last_logits_grouped");
  EXPECT_EQ(run.greedy, greedy);
}

// DeepSeek's latent attention keeps each head's value padded to the key's
// width in the cache: 24 wide for 16 nope + 8 rope dims.
TEST(HfVariants, DeepseekHeadsAreRopeAndNope) {
  const auto model = Model::load(fixture_dir("deepseek_v3"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.head_dim, 24);
  EXPECT_EQ(c.n_rot, 8);
  EXPECT_EQ(c.n_head_kv, c.n_head);
  EXPECT_EQ(c.mla_q_rank, 24);
  EXPECT_EQ(c.mla_v_dim, 16);
  // YaRN factor 4 with mscale_all_dim 1: the scores' scale (0.1 ln 4 + 1)^2 / sqrt(24).
  EXPECT_NEAR(c.attn_scale, std::pow(0.1 * std::log(4.0) + 1.0, 2.0) / std::sqrt(24.0), 1e-6);
}

// The Gemma fixture with another query_pre_attn_scalar (as Gemma 3 27B's
// differs from its head_dim): the scores' scale follows the config.
TEST(HfVariants, GemmaQueryScalarSetsTheScale) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_gemma3_scalar");
  const auto model = load_edited("gemma3", dir, [](nlohmann::json& c) { c["query_pre_attn_scalar"] = 10; });
  const auto ref = reference("gemma3");
  expect_matches(ref, run_reference_batch(model, ref, 1), model->config().n_vocab, kTolerance,
                 "last_logits_query_pre_attn_scalar_10");
}

// Gemma's layer kinds and RoPE from the older spellings published
// checkpoints use: sliding_window_pattern, rope_theta + rope_scaling,
// rope_local_base_freq. The same model, the same logits.
TEST(HfVariants, GemmaLegacyConfigKeys) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_gemma3_legacy");
  const auto model = load_edited("gemma3", dir, [](nlohmann::json& c) {
    const nlohmann::json rope = c["rope_parameters"];
    c.erase("layer_types");
    c.erase("rope_parameters");
    c["sliding_window_pattern"] = 6;
    c["rope_theta"] = rope["full_attention"]["rope_theta"];
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", rope["full_attention"]["factor"]}};
    c["rope_local_base_freq"] = rope["sliding_attention"]["rope_theta"];
  });
  EXPECT_EQ(model->config().local_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  const auto ref = reference("gemma3");
  expect_matches(ref, run_reference_batch(model, ref, 1), model->config().n_vocab, kTolerance);
}

// Gemma 2 as its published configs spell it (transformers 4.42): no
// layer_types (every other layer local, the first one local), rope_theta at
// the top level, "hidden_act". The same model, the same logits.
TEST(HfVariants, Gemma2PublishedConfigKeys) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_gemma2_published");
  const auto model = load_edited("gemma2", dir, [](nlohmann::json& c) {
    c.erase("layer_types");
    c["rope_theta"] = c["rope_parameters"]["rope_theta"];
    c.erase("rope_parameters");
    c["hidden_act"] = c["hidden_activation"];
    c.erase("hidden_activation");
    c["cache_implementation"] = "hybrid";
  });
  EXPECT_EQ(model->config().local_layers, (std::vector<uint8_t>{1, 0, 1, 0}));
  EXPECT_FLOAT_EQ(model->config().attn_softcap, 2.0f);
  EXPECT_FLOAT_EQ(model->config().final_softcap, 3.0f);
  expect_reference_batch(model, reference("gemma2"));
}

// Gemma 2 keeps one RoPE for both kinds of layers: a scaled one is refused
// rather than applied to the global layers only.
TEST(HfVariants, Gemma2WithRopeScalingIsRefused) {
  st_test::TempDir dir("hf_gemma2_scaled");
  try {
    load_edited("gemma2", dir, [](nlohmann::json& c) {
      c["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 10000.0}};
    });
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("Gemma 2 with RoPE scaling is not supported"), std::string::npos) << e.what();
  }
}

// SmolLM3 with use_sliding_window: without layer_types, transformers slides
// the NoPE layers (window 4 here), and so does the loader.
TEST(HfVariants, SmolLM3SlidingWindowOnTheNopeLayers) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_smollm3_sliding");
  const auto model = load_edited("smollm3", dir, [](nlohmann::json& c) {
    c["use_sliding_window"] = true;
    c["sliding_window"] = 4;
    c.erase("layer_types");
  });
  EXPECT_EQ(model->config().local_layers, (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(model->config().window(3), 4);
  EXPECT_EQ(model->config().window(0), 0);
  const auto ref = reference("smollm3");
  expect_matches(ref, run_reference_batch(model, ref, 1), model->config().n_vocab, kTolerance, "last_logits_sliding");
}

// A no_rope_layers list that does not fit the model is refused, naming it.
TEST(HfVariants, SmolLM3NoRopeLayersMustFitTheModel) {
  st_test::TempDir dir("hf_smollm3_bad");
  try {
    load_edited("smollm3", dir, [](nlohmann::json& c) { c["no_rope_layers"] = {1, 1, 0}; });
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_format);
    EXPECT_NE(std::string(e.what()).find("no_rope_layers must list num_hidden_layers entries"), std::string::npos)
        << e.what();
  }
}

// LongRoPE as the published Phi-3.5 / Phi-4-mini configs spell it:
// "rope_scaling" with "type": "longrope", rope_theta and
// original_max_position_embeddings at the top level.
TEST(HfVariants, LongRopeLegacyConfigKeys) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_longrope_legacy");
  const auto model = load_edited(
      "phi3_longrope", dir,
      [](nlohmann::json& c) {
        nlohmann::json rope = c["rope_parameters"];
        c.erase("rope_parameters");
        c["rope_theta"] = rope["rope_theta"];
        c["partial_rotary_factor"] = rope["partial_rotary_factor"];
        c["rope_scaling"] = {{"type", "longrope"},
                             {"long_factor", rope["long_factor"]},
                             {"short_factor", rope["short_factor"]}};
      },
      {.context_length = 48});
  EXPECT_EQ(model->config().rope_orig_ctx, 6);
  expect_reference_batch(model, reference("phi3_longrope"));
}

// A factor list of the wrong length or with a non-positive factor, or no
// original context: refused, naming what is wrong.
TEST(HfVariants, LongRopeConfigErrors) {
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& c) { c["rope_parameters"]["long_factor"].push_back(1.0); },
       "'long_factor' has 7 factors; the rotary dimensions need 6"},
      {[](nlohmann::json& c) { c["rope_parameters"]["short_factor"][2] = 0.0; },
       "'short_factor' holds a factor that is not a positive number"},
      {[](nlohmann::json& c) { c["rope_parameters"].erase("long_factor"); }, "longrope needs a list 'long_factor'"},
      {[](nlohmann::json& c) {
         c["rope_parameters"].erase("original_max_position_embeddings");
         c.erase("original_max_position_embeddings");
       },
       "longrope needs a positive original_max_position_embeddings"},
  };
  for (const auto& [edit, want] : cases) {
    st_test::TempDir dir("hf_longrope_bad");
    try {
      load_edited("phi3_longrope", dir, edit);
      ADD_FAILURE() << "loaded; wanted: " << want;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::bad_format);
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

// Gemma 3 4B-27B are Gemma3ForConditionalGeneration checkpoints: the text
// model's tensors under language_model.model.*, its config in text_config
// (the layout transformers' save_pretrained writes). The gemma3 fixture in
// that form gives transformers' text logits (make_hf_tiny_models.py checks
// that transformers' multimodal model does: max_diff_conditional_generation).
TEST(HfVariants, GemmaMultimodalCheckpointLoadsItsTextModel) {
  const test::ExactMath exact;
  const auto ref = reference("gemma3");
  ASSERT_LT(ref["max_diff_conditional_generation"].get<double>(), 1e-5);
  st_test::TempDir dir("hf_gemma3_mm");
  const auto file = safetensors::File::open(fixture_dir("gemma3") + "/model.safetensors");
  std::vector<st_test::Tensor> tensors;
  for (const safetensors::TensorInfo& t : file.tensors()) {
    tensors.push_back({"language_model." + t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.n_bytes)});
  }
  tensors.push_back({"vision_tower.embeddings.patch_embedding.bias", "F32", {16}, std::vector<uint8_t>(64)});
  st_test::write_safetensors(dir.file("model.safetensors"), tensors);
  std::ifstream in(fixture_dir("gemma3") + "/config.json");
  nlohmann::json text = nlohmann::json::parse(in);
  text.erase("architectures");
  const bool tied = text["tie_word_embeddings"].get<bool>();
  text.erase("tie_word_embeddings");
  const nlohmann::json cfg = {{"architectures", {"Gemma3ForConditionalGeneration"}},
                              {"model_type", "gemma3"},
                              {"tie_word_embeddings", tied},
                              {"text_config", text},
                              {"vision_config", {{"hidden_size", 16}, {"model_type", "siglip_vision_model"}}}};
  st_test::write_text(dir.file("config.json"), cfg.dump());
  const auto model = Model::load(dir.path().string());
  EXPECT_EQ(model->config().arch, "gemma3");
  expect_reference_batch(model, ref);
}

// LFM2's config as LiquidAI publish it: block_ff_dim and tie_embedding (read
// before transformers' own keys), rope_theta at the top, and the attention
// layers as full_attn_idxs instead of layer_types. The same model, the same
// logits.
TEST(HfVariants, Lfm2PublishedConfigSpelling) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_lfm2_published");
  const auto model = load_edited("lfm2", dir, [](nlohmann::json& c) {
    c["block_ff_dim"] = c["intermediate_size"];
    c["intermediate_size"] = 12;  // ignored: block_ff_dim wins
    c["tie_embedding"] = true;
    c["tie_word_embeddings"] = false;  // ignored: tie_embedding wins
    c["rope_theta"] = c["rope_parameters"]["rope_theta"];
    c.erase("rope_parameters");
    c.erase("layer_types");
    c["full_attn_idxs"] = nlohmann::json::array({2});
  });
  EXPECT_EQ(model->config().conv_layers, (std::vector<uint8_t>{1, 1, 0, 1}));
  EXPECT_EQ(model->config().n_ff, 64);
  expect_reference_batch(model, reference("lfm2"));
}

// Config values the loader refuses with a sentence naming the key.
TEST(HfVariants, Lfm2RefusesUnknownLayerKinds) {
  st_test::TempDir dir("hf_lfm2_bad");
  EXPECT_THROW(load_edited("lfm2", dir, [](nlohmann::json& c) { c["layer_types"][1] = "linear_attention"; }), Error);
  st_test::TempDir dir2("hf_lfm2_bad_idx");
  EXPECT_THROW(load_edited("lfm2", dir2, [](nlohmann::json& c) {
                 c.erase("layer_types");
                 c["full_attn_idxs"] = nlohmann::json::array({9});
               }),
               Error);
  st_test::TempDir dir3("hf_lfm2_bad_taps");
  EXPECT_THROW(load_edited("lfm2", dir3, [](nlohmann::json& c) { c["conv_L_cache"] = 4; }), Error);  // weights have 3
}

// LFM2-MoE's routed_scaling_factor (1.0 in the published model and the
// fixture) scales the renormalized expert weights.
TEST(HfVariants, Lfm2MoeRoutedScalingFactor) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_lfm2_moe_scaled");
  const auto model = load_edited("lfm2_moe", dir, [](nlohmann::json& c) { c["routed_scaling_factor"] = 1.5; });
  EXPECT_EQ(model->config().expert_weights_scale, 1.5f);
  const auto ref = reference("lfm2_moe");
  expect_matches(ref, run_reference_batch(model, ref, 1), model->config().n_vocab, kTolerance, "last_logits_scaled");
}

// Ministral 3's attention temperature, read from the rope settings of the
// checkpoint and from the GGUF file alike; without it (beta 0) the logits
// move, so the fixture's match (hf_models_test) shows it applied.
TEST(HfVariants, Ministral3AttentionTemperature) {
  const test::ExactMath exact;
  for (const std::string& path : {fixture_dir("ministral3"), std::string(TROUPE_FIXTURES_DIR) + "/gguf/ministral3.gguf"}) {
    SCOPED_TRACE(path);
    const auto model = Model::load(path);
    EXPECT_EQ(model->config().arch, "ministral3");
    EXPECT_EQ(model->config().attn_temp_beta, 0.5f);
    EXPECT_EQ(model->config().attn_temp_floor, 4);
  }
  const auto ref = reference("ministral3");
  ASSERT_GT(ref["max_diff_without_temperature"].get<double>(), 1e-2);
  st_test::TempDir dir("hf_ministral3_no_temperature");
  const auto cold = load_edited("ministral3", dir, [](nlohmann::json& c) {
    c["rope_parameters"]["llama_4_scaling_beta"] = 0.0;
  });
  const BatchRun run = run_reference_batch(cold, ref, 1);
  double worst = 0;
  const auto want = ref["last_logits"].get<std::vector<std::vector<float>>>();
  const int64_t n_vocab = cold->config().n_vocab;
  for (size_t i = 0; i < want.size(); ++i) {
    for (int64_t v = 0; v < n_vocab; ++v) {
      worst = std::max(worst, std::fabs(static_cast<double>(run.prompt_logits[i * n_vocab + v]) - want[i][v]));
    }
  }
  EXPECT_GT(worst, 1e-2);
}

// Mistral3ForConditionalGeneration whose top level names no tie: the text
// config's untied head, under language_model.lm_head.
TEST(HfVariants, Mistral3TieFromTheTextConfig) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_mistral3_text_tie");
  const auto model = load_edited("mistral3", dir, [](nlohmann::json& c) { c.erase("tie_word_embeddings"); });
  EXPECT_FALSE(model->config().tied_output);
  expect_reference_batch(model, reference("mistral3"));
}

// Qwen3-VL-MoE's fused experts as transformers 5 saves them, in nn.Linear's
// layout ([E, 2 ffn, hidden], [E, hidden, ffn]: used in place), against the
// fixture's published, transposed layout (copied at load). The same logits.
TEST(HfVariants, Qwen3VlMoeExpertsInEitherLayout) {
  const test::ExactMath exact;
  st_test::TempDir dir("hf_qwen3_vl_moe_linear");
  const auto file = safetensors::File::open(fixture_dir("qwen3_vl_moe") + "/model.safetensors");
  std::vector<st_test::Tensor> tensors;
  int n_fused = 0;
  for (const safetensors::TensorInfo& t : file.tensors()) {
    st_test::Tensor out{t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.n_bytes)};
    if (t.name.ends_with("mlp.experts.gate_up_proj") || t.name.ends_with("mlp.experts.down_proj")) {
      ASSERT_EQ(t.dtype, "F32");
      const int64_t e = t.shape[0], r = t.shape[1], k = t.shape[2];
      const auto* src = reinterpret_cast<const float*>(t.data);
      auto* dst = reinterpret_cast<float*>(out.bytes.data());
      for (int64_t x = 0; x < e; ++x) {
        for (int64_t i = 0; i < r; ++i) {
          for (int64_t j = 0; j < k; ++j) dst[(x * k + j) * r + i] = src[(x * r + i) * k + j];
        }
      }
      out.shape = {e, k, r};
      ++n_fused;
    }
    tensors.push_back(std::move(out));
  }
  ASSERT_EQ(n_fused, 4);  // 2 layers
  st_test::write_safetensors(dir.file("model.safetensors"), tensors);
  std::filesystem::copy(fixture_dir("qwen3_vl_moe") + "/config.json", dir.file("config.json"));
  const auto model = Model::load(dir.path().string());
  EXPECT_EQ(model->config().arch, "qwen3moe");
  EXPECT_TRUE(model->config().expert_weights_norm);
  expect_reference_batch(model, reference("qwen3_vl_moe"));
}

}  // namespace
}  // namespace troupe
