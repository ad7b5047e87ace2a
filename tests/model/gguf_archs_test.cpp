// GGUF files of every architecture Troupe reads from GGUF, as llama.cpp's
// own converter (convert_hf_to_gguf.py) writes them: the tiny Hugging Face
// fixtures converted by tools/fixtures/make_gguf_arch_fixtures.py into
// tests/fixtures/gguf/<arch>.gguf, run through ModelStage and the Generator
// and held to the transformers logits and greedy tokens of
// tests/fixtures/hf/<arch>/reference.json. The file's layout (tensor names,
// unpermuted Qwen rows, 3-D expert tensors, metadata keys) and the reference
// both come from outside Troupe.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/generator.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "tests/exact_math.hpp"
#include "tests/model/gguf_test_util.hpp"
#include "tests/model/hf_reference_run.hpp"

namespace troupe {
namespace {

using namespace hf_test;  // NOLINT: the fixture helpers

std::string gguf_fixture(const std::string& arch) {
  return std::string(TROUPE_FIXTURES_DIR) + "/gguf/" + arch + ".gguf";
}

struct Case {
  std::string arch;  // fixture name (tests/fixtures/{hf,gguf})
  std::string as;    // ModelConfig::arch the file loads as
  kernels::RopeLayout rope;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.arch; }

class GgufConversion : public testing::TestWithParam<Case> {};

TEST_P(GgufConversion, BatchedStageMatchesTransformers) {
  const test::ExactMath exact;
  const Case& c = GetParam();
  const auto ref = reference(c.arch);
  auto model = Model::load(gguf_fixture(c.arch));
  EXPECT_EQ(model->config().arch, c.as);
  EXPECT_EQ(model->config().rope_layout, c.rope);
  expect_reference_batch(model, ref);
}

TEST_P(GgufConversion, GeneratorMatchesTransformers) {
  const test::ExactMath exact;
  const auto ref = reference(GetParam().arch);
  auto model = Model::load(gguf_fixture(GetParam().arch));
  CpuBackend backend({.n_threads = 2});
  Generator gen(model, backend, {.n_ctx = 48, .prefill_chunk = 5, .kv_block_size = kBlock});
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    const std::vector<float> got = gen.prompt_logits(prompts[i]);
    EXPECT_LT(max_abs_diff(got.data(), ref["last_logits"][i].get<std::vector<float>>()), kTolerance);
    const auto want_ids = ref["greedy"][i].get<std::vector<int32_t>>();
    const auto ids = gen.generate(prompts[i], {.max_new_tokens = static_cast<int64_t>(want_ids.size()),
                                               .sampling = {.temperature = 0.0f},
                                               .stop_tokens = {-1}});
    EXPECT_EQ(ids, want_ids);
  }
}

// llama.cpp names Mixtral "llama" with expert tensors; Qwen files keep the
// checkpoint's Q/K rows (rotate-half RoPE), "llama" files are permuted.
INSTANTIATE_TEST_SUITE_P(Fixtures, GgufConversion,
                         testing::Values(Case{"llama", "llama", kernels::RopeLayout::normal},
                                         Case{"qwen2", "qwen2", kernels::RopeLayout::neox},
                                         Case{"qwen2_yarn", "qwen2", kernels::RopeLayout::neox},
                                         Case{"qwen3", "qwen3", kernels::RopeLayout::neox},
                                         Case{"mixtral", "mixtral", kernels::RopeLayout::normal},
                                         Case{"qwen2moe", "qwen2moe", kernels::RopeLayout::neox},
                                         Case{"qwen3moe", "qwen3moe", kernels::RopeLayout::neox},
                                         Case{"gemma2", "gemma2", kernels::RopeLayout::neox},
                                         Case{"gemma3", "gemma3", kernels::RopeLayout::neox},
                                         Case{"phi3", "phi3", kernels::RopeLayout::neox},
                                         Case{"smollm3", "smollm3", kernels::RopeLayout::normal},
                                         Case{"olmo2", "olmo2", kernels::RopeLayout::neox},
                                         Case{"olmo3", "olmo2", kernels::RopeLayout::neox},
                                         Case{"starcoder2", "starcoder2", kernels::RopeLayout::neox},
                                         Case{"granite", "granite", kernels::RopeLayout::normal},
                                         Case{"glm4", "glm4", kernels::RopeLayout::normal},
                                         Case{"glm4_moe", "glm4moe", kernels::RopeLayout::neox},
                                         Case{"exaone4", "exaone4", kernels::RopeLayout::neox},
                                         Case{"ernie4_5", "ernie4_5", kernels::RopeLayout::normal},
                                         Case{"ernie4_5_moe", "ernie4_5-moe", kernels::RopeLayout::normal},
                                         Case{"deepseek_v2", "deepseek2", kernels::RopeLayout::normal},
                                         Case{"deepseek_v3", "deepseek2", kernels::RopeLayout::normal},
                                         Case{"cohere", "command-r", kernels::RopeLayout::normal},
                                         Case{"cohere2", "cohere2", kernels::RopeLayout::normal},
                                         Case{"lfm2", "lfm2", kernels::RopeLayout::neox},
                                         Case{"lfm2_moe", "lfm2moe", kernels::RopeLayout::neox},
                                         Case{"ministral3", "ministral3", kernels::RopeLayout::normal},
                                         Case{"glm4_moe_lite", "deepseek2", kernels::RopeLayout::normal},
                                         Case{"seed_oss", "llama", kernels::RopeLayout::neox},
                                         Case{"qwen3_vl", "qwen3", kernels::RopeLayout::neox},
                                         Case{"qwen3_vl_moe", "qwen3moe", kernels::RopeLayout::neox},
                                         Case{"olmoe", "olmoe", kernels::RopeLayout::neox},
                                         Case{"granitemoe", "granitemoe", kernels::RopeLayout::normal},
                                         Case{"hunyuan_dense", "hunyuan-dense", kernels::RopeLayout::neox},
                                         Case{"minimax_m2", "minimax-m2", kernels::RopeLayout::neox},
                                         Case{"apertus", "apertus", kernels::RopeLayout::neox},
                                         Case{"qwen3_next", "qwen3next", kernels::RopeLayout::neox},
                                         Case{"qwen3_5", "qwen35", kernels::RopeLayout::neox},
                                         Case{"qwen3_5_moe", "qwen35moe", kernels::RopeLayout::neox},
                                         Case{"granite_hybrid", "granitehybrid", kernels::RopeLayout::normal}),
                         [](const testing::TestParamInfo<Case>& p) { return p.param.arch; });

TEST(GgufConversion, ExpertsAreSlicesOfTheFile) {
  const auto model = Model::load(gguf_fixture("qwen3moe"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.n_expert, 4);
  EXPECT_EQ(c.n_expert_used, 2);
  EXPECT_EQ(c.n_ff, 16);  // expert_feed_forward_length, not feed_forward_length (48)
  EXPECT_EQ(c.head_dim, 24);
  const auto& experts = model->weights().layers[1].experts;
  ASSERT_EQ(experts.size(), 4u);
  // Expert e starts e whole f32 matrices [16, 64] into the 3-D tensor: in place, no copy.
  const auto* base = static_cast<const unsigned char*>(experts[0].w_up.data);
  EXPECT_EQ(static_cast<const unsigned char*>(experts[3].w_up.data) - base, 3 * 16 * 64 * 4);
  EXPECT_EQ(experts[2].w_down.n_in, 16);
  EXPECT_EQ(experts[2].w_down.n_out, 64);
}

// The fixture with the first occurrence of `from` overwritten by `to` (same
// length, so the file stays well-formed).
std::string with_bytes_replaced(const std::string& arch, const std::string& from, const std::string& to) {
  auto bytes = gguf::test::read_bytes(gguf_fixture(arch));
  const size_t at = gguf::test::find_bytes(bytes, from);
  std::copy(to.begin(), to.end(), bytes.begin() + static_cast<std::ptrdiff_t>(at));
  const std::string path = gguf::test::temp_path(arch + "_edited");
  gguf::test::write_bytes(path, bytes);
  return path;
}

// Gemma 2: every other layer local, one RoPE base, both caps from the file.
TEST(GgufConversion, Gemma2LayerKindsAndSoftCaps) {
  const auto model = Model::load(gguf_fixture("gemma2"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.local_layers, (std::vector<uint8_t>{1, 0, 1, 0}));
  EXPECT_EQ(c.window(0), 4);
  EXPECT_EQ(c.window(1), 0);
  EXPECT_FLOAT_EQ(c.rope_local_theta, c.rope_theta);
  EXPECT_FLOAT_EQ(c.attn_softcap, 2.0f);
  EXPECT_FLOAT_EQ(c.final_softcap, 3.0f);
  EXPECT_FLOAT_EQ(c.embed_scale, 8.0f);  // sqrt(64)
  EXPECT_EQ(model->weights().layers[0].q_norm, nullptr);
}

// SmolLM3: llama.cpp's fixed step, every fourth layer without RoPE.
TEST(GgufConversion, SmolLM3LeavesRopeOutOfEveryFourthLayer) {
  const auto model = Model::load(gguf_fixture("smollm3"));
  EXPECT_EQ(model->config().nope_layers, (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_TRUE(model->config().ropes(2));
  EXPECT_FALSE(model->config().ropes(3));
}

// Qwen2-MoE: the shared expert beside the routed ones, and llama.cpp's
// routing (the top k's shares of the softmax over all, not renormalized).
TEST(GgufConversion, Qwen2MoeSharedExpert) {
  const auto model = Model::load(gguf_fixture("qwen2moe"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.n_ff, 16);
  EXPECT_EQ(c.n_ff_shared, 24);
  EXPECT_FALSE(c.expert_weights_norm);
  const LayerWeights& l = model->weights().layers[1];
  EXPECT_EQ(l.shared.w_down.n_in, 24);
  EXPECT_EQ(l.shared_gate.n_in, 64);
  EXPECT_EQ(l.shared_gate.n_out, 1);
}

TEST(GgufConversion, GemmaLayerKindsAndScales) {
  const auto model = Model::load(gguf_fixture("gemma3"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.local_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));  // every sixth layer global
  EXPECT_EQ(c.window(0), 4);
  EXPECT_EQ(c.window(5), 0);
  EXPECT_FLOAT_EQ(c.rope_local_theta, 10000.0f);
  EXPECT_FLOAT_EQ(c.rope_theta, 1e6f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.125f);
  EXPECT_FLOAT_EQ(c.embed_scale, 8.0f);
  EXPECT_FLOAT_EQ(c.attn_scale, 0.25f);
}

// gpt-oss as llama.cpp's converter writes it: gate and up split out of the
// interleaved gate_up_proj, biases as {n, n_expert} tensors, the sinks, the
// norm before the experts named post_attention_norm. GGUF files carry no
// YaRN 'truncate' and llama.cpp always rounds the ramp's ends out, so the
// file is held to transformers run with truncate true (the fixture script
// checks that this differs from the checkpoint's truncate false).
TEST(GgufConversion, GptOssMatchesTransformersWithTruncatedYarn) {
  const test::ExactMath exact;
  nlohmann::json ref = reference("gpt_oss");
  ASSERT_GT(ref["max_diff_yarn_truncated"].get<float>(), 1e-2f);
  ref["last_logits"] = ref["last_logits_yarn_truncated"];
  ref["greedy"] = ref["greedy_yarn_truncated"];
  auto model = Model::load(gguf_fixture("gpt_oss"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "gpt-oss");
  EXPECT_EQ(c.rope_layout, kernels::RopeLayout::neox);
  EXPECT_EQ(c.window(0), 4);
  EXPECT_EQ(c.window(1), 0);
  EXPECT_FLOAT_EQ(c.expert_swiglu_limit, 7.0f);
  EXPECT_NE(model->weights().layers[1].attn_sinks, nullptr);
  EXPECT_NE(model->weights().layers[1].experts[3].b_down, nullptr);
  expect_reference_batch(model, ref);
}

TEST(GgufConversion, UnknownArchitectureListsTheSupportedOnes) {
  // general.architecture is the file's first key, so its value is the first "qwen3".
  const std::string path = with_bytes_replaced("qwen3", "qwen3", "gemma");
  gguf::test::expect_error(
      [&] { Model::load(path); }, Errc::unsupported,
      {"architecture 'gemma'",
       "supported: llama, qwen2, qwen3, qwen2moe, qwen3moe, gemma2, gemma3, phi3, smollm3, olmo2, starcoder2, "
       "granite, gpt-oss"});
}

TEST(GgufConversion, MissingExpertTensorIsNamed) {
  const std::string path = with_bytes_replaced("qwen3moe", "blk.1.ffn_up_exps", "blk.1.ffn_up_expX");
  gguf::test::expect_error([&] { Model::load(path); }, Errc::bad_format, {"'blk.1.ffn_up_exps.weight'"});
}

// LongRoPE needs both factor lists and the original context (longrope_test.cpp
// runs the whole file).
TEST(GgufConversion, LongRopeWithoutItsShortFactorsOrOriginalContext) {
  std::string path = with_bytes_replaced("phi3_longrope", "rope_factors_short", "rope_factors_shorX");
  gguf::test::expect_error([&] { Model::load(path); }, Errc::bad_format,
                           {"LongRoPE needs both rope_factors_long.weight and rope_factors_short.weight"});
  path = with_bytes_replaced("phi3_longrope", "original_context_length", "original_context_lengtX");
  gguf::test::expect_error([&] { Model::load(path); }, Errc::bad_format,
                           {"phi3.rope.scaling.original_context_length"});
}

TEST(GgufConversion, UnknownRopeScalingIsRefused) {
  const std::string path = with_bytes_replaced("qwen2_yarn", "yarn", "xarn");
  gguf::test::expect_error([&] { Model::load(path); }, Errc::unsupported,
                           {"rope.scaling.type 'xarn' is not supported (linear and yarn are)"});
}

TEST(GgufConversion, MissingQkNormIsNamed) {
  const std::string path = with_bytes_replaced("qwen3", "blk.0.attn_k_norm", "blk.0.attn_k_nore");
  gguf::test::expect_error([&] { Model::load(path); }, Errc::bad_format, {"'blk.0.attn_k_norm.weight'"});
}

}  // namespace
}  // namespace troupe
