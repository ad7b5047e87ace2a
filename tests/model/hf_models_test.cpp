// Hugging Face models against transformers: for each architecture, the tiny
// random model in tests/fixtures/hf/<arch>/ (made by
// tools/fixtures/make_hf_tiny_models.py with save_pretrained) run as one
// ragged batch through ModelStage with scattered KV blocks, through the
// Generator, and split over two stages; logits within 1e-4 of transformers'
// and greedy continuations identical. Also bf16 and quantized weights, RoPE
// frequencies, and loader errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/generator.hpp"
#include "model/hf_config.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "model/layers.hpp"
#include "model/rope_scaling.hpp"
#include "tests/model/hf_reference_run.hpp"
#include "safetensors_test_util.hpp"
#include "tests/exact_math.hpp"

namespace troupe {
namespace {

using namespace hf_test;  // NOLINT: the fixture helpers

class HfArch : public testing::TestWithParam<std::string> {};

TEST_P(HfArch, BatchedStageMatchesTransformers) {
  const test::ExactMath exact;  // transformers' float math, also for the bf16 fixture
  const auto ref = reference(GetParam());
  auto model = Model::load(fixture_dir(GetParam()));
  // OLMo 3 is OLMo 2's layer with local layers, as llama.cpp names it too.
  const std::string arch = GetParam().starts_with("gpt_oss") ? "gpt-oss"
                           : GetParam() == "olmo3"          ? "olmo2"
                           : GetParam() == "glm4_moe"       ? "glm4moe"
                           : GetParam().starts_with("exaone") ? "exaone4"
                           : GetParam() == "deepseek_v2"    ? "deepseek2"
                           : GetParam().starts_with("deepseek_v3") ? "deepseek3"
                           : GetParam() == "glm4_moe_lite"  ? "deepseek3"  // GLM-4.7-Flash: V3's layer
                           : GetParam() == "seed_oss"       ? "llama"      // the Llama layer with q/k/v biases
                           : GetParam() == "qwen3_vl"       ? "qwen3"      // its text model
                           : GetParam() == "qwen3_vl_moe"   ? "qwen3moe"
                           : GetParam() == "hunyuan_dense"  ? "hunyuan-dense"
                           : GetParam() == "minimax_m2"     ? "minimax-m2"
                           : GetParam() == "ernie4_5_moe"   ? "ernie4_5-moe"
                           : GetParam() == "ernie4_5"       ? "ernie4_5"
                           : GetParam() == "cohere"         ? "command-r"
                           : GetParam() == "lfm2_moe"       ? "lfm2moe"
                           : GetParam().starts_with("granite_hybrid") ? "granitehybrid"
                           : GetParam() == "qwen3_next"     ? "qwen3next"
                           : GetParam() == "qwen3_5"        ? "qwen35"     // its text model
                           : GetParam() == "qwen3_5_moe"    ? "qwen35moe"
                           : GetParam() == "mistral3"       ? "mistral"  // its text_config's model
                                                            : GetParam().substr(0, GetParam().find('_'));
  EXPECT_EQ(model->config().arch, arch);
  expect_reference_batch(model, ref);
}

TEST_P(HfArch, GeneratorMatchesTransformers) {
  const test::ExactMath exact;  // transformers' float math, also for the bf16 fixture
  const auto ref = reference(GetParam());
  auto model = Model::load(fixture_dir(GetParam()));
  CpuBackend backend({.n_threads = 2});
  // Prefill in chunks of 5: prompts cross chunk (and KV page) boundaries.
  Generator gen(model, backend, {.n_ctx = 48, .prefill_chunk = 5, .kv_block_size = kBlock});
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    const auto want = ref["last_logits"][i].get<std::vector<float>>();
    const std::vector<float> got = gen.prompt_logits(prompts[i]);
    EXPECT_LT(max_abs_diff(got.data(), want), kTolerance);
    const auto want_ids = ref["greedy"][i].get<std::vector<int32_t>>();
    const auto ids = gen.generate(prompts[i], {.max_new_tokens = static_cast<int64_t>(want_ids.size()),
                                               .sampling = {.temperature = 0.0f},
                                               .stop_tokens = {-1}});
    EXPECT_EQ(ids, want_ids);
  }
}

TEST_P(HfArch, TwoStagesEqualOneStage) {
  const test::ExactMath exact;  // transformers' float math, also for the bf16 fixture
  const auto ref = reference(GetParam());
  auto model = Model::load(fixture_dir(GetParam()));
  const int64_t n_layer = model->config().n_layer;
  ASSERT_GE(n_layer, 2);
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  CpuBackend backend({.n_threads = 2});
  ModelStage whole(model, backend, stage_options(prompts.size()));
  ModelStage first(model, backend, stage_options(prompts.size(), 0, n_layer / 2));
  ModelStage second(model, backend, stage_options(prompts.size(), n_layer / 2, n_layer));
  EXPECT_TRUE(first.is_first());
  EXPECT_FALSE(first.is_last());
  EXPECT_EQ(first.output_width(), model->config().n_embd);
  EXPECT_EQ(second.output_width(), model->config().n_vocab);
  const BatchRun one = run_batched(model, prompts, 4, {&whole});
  const BatchRun two = run_batched(model, prompts, 4, {&first, &second});
  // The same kernels on the same inputs: the split changes nothing at all.
  EXPECT_EQ(one.prompt_logits, two.prompt_logits);
  EXPECT_EQ(one.greedy, two.greedy);
  expect_matches(ref, two, model->config().n_vocab, kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfArch,
                         testing::Values("llama", "mistral", "qwen2", "qwen2_yarn", "qwen3", "mixtral", "qwen2moe",
                                         "qwen3moe", "gemma2", "gemma3", "phi3", "smollm3", "olmo2", "olmo3",
                                         "starcoder2", "granite", "gpt2", "llama_bf16", "gpt_oss", "gpt_oss_mxfp4",
                                         "glm4", "glm4_moe", "exaone4",
                                         "deepseek_v2", "deepseek_v3", "ernie4_5", "ernie4_5_moe",
                                         "cohere", "cohere2", "lfm2", "lfm2_conv_bias", "lfm2_moe",
                                         "ministral3", "mistral3", "glm4_moe_lite", "seed_oss",
                                         "qwen3_vl", "qwen3_vl_moe", "olmoe", "granitemoe",
                                         "hunyuan_dense", "minimax_m2", "apertus", "qwen3_next", "qwen3_5",
                                         "qwen3_5_moe", "granite_hybrid", "granite_hybrid_dense",
                                         // pre-quantized checkpoints (tools/fixtures/make_hf_quantized_models.py)
                                         "qwen3_fp8", "qwen3moe_fp8", "deepseek_v3_fp8", "llama_fp8_tensor",
                                         "qwen3_fp8_channel", "qwen3_w4a16", "llama_w4a16_asym", "qwen3_gptq",
                                         "qwen3_gptq_act_order", "qwen3_awq", "qwen3_w8a8", "llama_w8a8_group"),
                         [](const testing::TestParamInfo<std::string>& p) { return p.param; });

// A full prefill chunk through the MoE fixtures whose shared expert or
// dense layers are wider than the routed experts: it runs, finite.
TEST(HfModels, MoePrefillOfAFullChunk) {
  for (const char* name : {"qwen2moe", "glm4_moe"}) {
    SCOPED_TRACE(name);
    auto model = Model::load(fixture_dir(name));
    const ModelConfig& c = model->config();
    ASSERT_GT(std::max(c.n_ff_shared, c.n_ff_dense), c.n_ff);
    CpuBackend backend({.n_threads = 2});
    Generator gen(model, backend, {.n_ctx = 96, .prefill_chunk = 64, .kv_block_size = kBlock});
    std::vector<int32_t> prompt(64);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(3 + (i * 37) % 250);
    const std::vector<float> logits = gen.prompt_logits(prompt);
    ASSERT_EQ(static_cast<int64_t>(logits.size()), c.n_vocab);
    for (const float v : logits) ASSERT_TRUE(std::isfinite(v));
  }
}

// The step arena holds a block's widest temporaries at the published sizes
// (the tiny fixtures' embeddings dominate, so they cannot show it): Qwen1.5-
// MoE-A2.7B's shared expert (5632) is 4x its experts (1408), GLM-4.5-Air's
// dense layers (10944) 8x. The sums are what moe_ffn and swiglu_ffn hold at
// once: xb and proj, the router, the rows in and out, gate and up, the
// shared gate; xb, proj, gate and up.
TEST(HfModels, StepScratchHoldsTheWidestFfn) {
  const int64_t T = 512;
  ModelConfig qwen;
  qwen.n_embd = 2048, qwen.n_head = 16, qwen.n_head_kv = 16, qwen.head_dim = 128;
  qwen.n_ff = 1408, qwen.n_ff_shared = 5632, qwen.n_expert = 60;
  EXPECT_GE(layers::block_scratch_floats(qwen, T), T * (4 * 2048 + 60 + 2 * 5632 + 1));
  ModelConfig air;
  air.n_embd = 4096, air.n_head = 96, air.n_head_kv = 8, air.head_dim = 128;
  air.n_ff = 1408, air.n_ff_shared = 1408, air.n_ff_dense = 10944, air.n_expert = 128;
  EXPECT_GE(layers::block_scratch_floats(air, T), T * (2 * 4096 + 2 * 10944));
}

// gpt-oss's published layout: the experts' MXFP4 blocks and scales become
// GGUF MXFP4 rows (gate and up from gate_up's even and odd rows), run as
// stored; the logits above hold them to transformers' dequantization.
TEST(HfModels, GptOssMxfp4ExpertsStayMxfp4) {
  auto model = Model::load(fixture_dir("gpt_oss_mxfp4"));
  const ExpertWeights& ex = model->weights().layers[1].experts[3];
  EXPECT_EQ(ex.w_gate.type, DType::mxfp4);
  EXPECT_EQ(ex.w_up.type, DType::mxfp4);
  EXPECT_EQ(ex.w_down.type, DType::mxfp4);
  EXPECT_EQ(ex.w_down.n_in, 32);
  EXPECT_NE(ex.b_up, nullptr);
  EXPECT_EQ(model->weights().layers[1].wq.type, DType::f32);
}

TEST(HfModels, Bf16WeightsStayBf16) {
  auto model = Model::load(fixture_dir("llama_bf16"));
  const ModelWeights& w = model->weights();
  EXPECT_EQ(w.tok_embd.type, DType::bf16);
  EXPECT_EQ(w.layers[0].wq.type, DType::bf16);
  EXPECT_EQ(w.layers[1].w_down.type, DType::bf16);
  EXPECT_EQ(w.output.type, DType::bf16);
}

TEST(HfModels, Bf16AgainstTransformersBf16Compute) {
  // transformers in bf16 rounds every activation to 8 mantissa bits; on these
  // logits that moved it by up to 0.066 from its own f32 compute
  // (max_diff_bf16_compute). Troupe accumulates in f32, so it is held to
  // 1e-4 of the f32-compute reference (above) and to 0.15 of this one.
  const auto ref = reference("llama_bf16");
  auto model = Model::load(fixture_dir("llama_bf16"));
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  CpuBackend backend({.n_threads = 2});
  ModelStage stage(model, backend, stage_options(prompts.size()));
  const BatchRun run = run_batched(model, prompts, 0, {&stage});
  EXPECT_LT(ref["max_diff_bf16_compute"].get<float>(), 0.1f);
  expect_matches(ref, run, model->config().n_vocab, 0.15f, "last_logits_bf16_compute");
}

class HfQuantized : public testing::TestWithParam<DType> {};

TEST_P(HfQuantized, MatchesTransformersOnGgufQuantizedWeights) {
  const test::ExactMath exact;  // a reference to float rounding
  // The reference: transformers in f32 on the values gguf-py's quantizer
  // rounds each matrix to. Troupe's matmul dequantizes exactly and
  // accumulates in f32, so the same 1e-4 holds.
  const DType type = GetParam();
  const auto ref = reference("llama");
  auto model = Model::load(fixture_dir("llama"), {.quantize = parse_quant_scheme(dtype_name(type))});
  const ModelWeights& w = model->weights();
  EXPECT_EQ(w.tok_embd.type, type);
  EXPECT_EQ(w.output.type, type);
  EXPECT_EQ(w.layers[0].wk.type, type);
  EXPECT_EQ(w.layers[1].w_up.type, type);
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  CpuBackend backend({.n_threads = 2});
  ModelStage stage(model, backend, stage_options(prompts.size()));
  const BatchRun run = run_batched(model, prompts, 0, {&stage});
  expect_matches(ref["quantized"][std::string(dtype_name(type))], run, model->config().n_vocab, kTolerance);
  EXPECT_LT(model->weight_bytes(), Model::load(fixture_dir("llama"))->weight_bytes() / 3);
}

INSTANTIATE_TEST_SUITE_P(Types, HfQuantized, testing::Values(DType::q8_0, DType::q4_0),
                         [](const testing::TestParamInfo<DType>& p) { return std::string(dtype_name(p.param)); });

// Quantizing at load (Q4_K_M) reaches every matrix of the architectures
// with their own (latent attention, routed, shared and dense experts): each runs a
// batch and its logits stay finite. (Their logits against transformers on
// quantized values are the llama fixture's business above.)
TEST(HfQuantized, EveryNewLayoutQuantizesAndRuns) {
  for (const char* name : {"glm4", "glm4_moe", "exaone4", "olmo3", "deepseek_v2", "deepseek_v3", "ernie4_5",
                           "ernie4_5_moe", "cohere", "cohere2", "lfm2", "lfm2_moe", "glm4_moe_lite", "qwen3_next",
                           "qwen3_5", "granite_hybrid"}) {
    SCOPED_TRACE(name);
    const auto ref = reference(name);
    auto model = Model::load(fixture_dir(name), {.quantize = parse_quant_scheme("q4_k_m")});
    const ModelConfig& c = model->config();
    const LayerWeights& last = model->weights().layers.back();
    // llama.cpp's mix: q4_K where a row holds super-blocks, its fallbacks
    // (q5_0, q8_0) in these 32- and 64-wide rows; never left f32.
    EXPECT_NE(last.wo.type, DType::f32);
    if (!last.experts.empty()) {
      EXPECT_NE(last.experts.back().w_down.type, DType::f32);
    }
    if (last.wkv_b.data != nullptr) {
      EXPECT_NE(last.wkv_b.type, DType::f32);
    }
    const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
    CpuBackend backend({.n_threads = 2});
    ModelStage stage(model, backend, stage_options(prompts.size()));
    const BatchRun run = run_batched(model, prompts, 2, {&stage});
    ASSERT_EQ(static_cast<int64_t>(run.prompt_logits.size()), static_cast<int64_t>(prompts.size()) * c.n_vocab);
    for (const float v : run.prompt_logits) ASSERT_TRUE(std::isfinite(v));
  }
}

// llama.cpp's Q4_K_M mix on a checkpoint whose rows (64 and 32 wide) no
// 256-value super-block divides: its fallbacks, q5_0 for q4_K and q8_0 for
// q6_K (the output head; attn_v and ffn_down of the last layer). With 5 and 8
// bits a matrix, the logits stay closer to transformers' f32 ones than the
// all-q4_0 model's (transformers on gguf-py's q4_0 values) are: measured
// 0.33-0.71 against 0.86-1.45.
TEST(HfModels, Q4KMMixFallsBackOnNarrowRows) {
  const test::ExactMath exact;
  const auto ref = reference("llama");
  auto model = Model::load(fixture_dir("llama"), {.quantize = parse_quant_scheme("q4_k_m")});
  const ModelWeights& w = model->weights();
  EXPECT_EQ(w.tok_embd.type, DType::q5_0);
  EXPECT_EQ(w.output.type, DType::q8_0);
  EXPECT_EQ(w.layers[0].wq.type, DType::q5_0);
  EXPECT_EQ(w.layers[0].wv.type, DType::q5_0);
  EXPECT_EQ(w.layers[0].w_down.type, DType::q5_0);  // rows of 32
  EXPECT_EQ(w.layers[1].wv.type, DType::q8_0);      // use_more_bits: the last eighth
  EXPECT_EQ(w.layers[1].w_down.type, DType::q8_0);
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  CpuBackend backend({.n_threads = 2});
  ModelStage stage(model, backend, stage_options(prompts.size()));
  const BatchRun run = run_batched(model, prompts, 0, {&stage});
  const int64_t n_vocab = model->config().n_vocab;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto f32 = ref["last_logits"][i].get<std::vector<float>>();
    const auto q4_0 = ref["quantized"]["q4_0"]["last_logits"][i].get<std::vector<float>>();
    float q4_0_error = 0;
    for (size_t v = 0; v < f32.size(); ++v) q4_0_error = std::max(q4_0_error, std::fabs(q4_0[v] - f32[v]));
    const float mix_error = max_abs_diff(run.prompt_logits.data() + i * static_cast<size_t>(n_vocab), f32);
    EXPECT_LT(mix_error, q4_0_error) << "prompt " << i;
  }
}

TEST(HfModels, QuantizeRejectsAnUnknownName) {
  st_test::expect_error([] { parse_quant_scheme("q4_k_x"); }, Errc::invalid_argument,
                        {"q4_k_x", "q8_0", "q4_k_m", "iq4_xs"});
}

TEST(HfModels, QuantizeNamesAMatrixItCannotBlock) {
  // stories260K's FFN is 172 wide: its down projection's rows do not split
  // into 32-value blocks.
  const std::string gguf = std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  st_test::expect_error([&] { Model::load(gguf, {.quantize = parse_quant_scheme("q8_0")}); }, Errc::unsupported,
                        {"stories260K.gguf", "'blk.0.ffn_down'", "172", "multiple of 32"});
}

TEST(HfModels, OneFileOfADirectoryIsNotAModel) {
  st_test::expect_error([] { Model::load(fixture_dir("llama") + "/model.safetensors"); }, Errc::invalid_argument,
                        {"model.safetensors", "directory"});
}

TEST(HfModels, RopeFrequenciesMatchTransformers) {
  // inv_freq as transformers computes it (including Llama 3 and linear
  // scaling) against theta^(-2i/n_rot) * freq_scale / freq_factors[i].
  for (const char* arch : {"llama", "mistral", "qwen2", "qwen3", "mixtral", "phi3"}) {
    SCOPED_TRACE(arch);
    const auto want = reference(arch)["inv_freq"].get<std::vector<double>>();
    const auto model = Model::load(fixture_dir(arch));
    const ModelConfig& c = model->config();
    EXPECT_EQ(c.rope_layout, kernels::RopeLayout::neox);
    ASSERT_EQ(static_cast<int64_t>(want.size()), c.n_rot / 2);
    for (size_t i = 0; i < want.size(); ++i) {
      const double f = c.rope_freq_factors.empty() ? 1.0 : c.rope_freq_factors[i];
      const double got = std::pow(static_cast<double>(c.rope_theta), -2.0 * static_cast<double>(i) /
                                                                         static_cast<double>(c.n_rot)) *
                         c.rope_freq_scale / f;
      EXPECT_NEAR(got, want[i], 1e-6 * want[i]) << "pair " << i;
    }
  }
  // Gemma 3: a table per kind of layer.
  const auto ref = reference("gemma3");
  const auto gemma3 = Model::load(fixture_dir("gemma3"));
  const ModelConfig& c = gemma3->config();
  for (const bool local : {false, true}) {
    SCOPED_TRACE(local ? "sliding_attention" : "full_attention");
    const auto want = ref[local ? "inv_freq_sliding_attention" : "inv_freq_full_attention"].get<std::vector<double>>();
    ASSERT_EQ(static_cast<int64_t>(want.size()), c.n_rot / 2);
    for (size_t i = 0; i < want.size(); ++i) {
      const double theta = local ? c.rope_local_theta : c.rope_theta;
      const double scale = local ? 1.0 : c.rope_freq_scale;
      const double got = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(c.n_rot)) * scale;
      EXPECT_NEAR(got, want[i], 1e-6 * want[i]) << "pair " << i;
    }
  }
}

TEST(HfModels, ConfigFields) {
  const auto mistral = Model::load(fixture_dir("mistral"));
  EXPECT_EQ(mistral->config().sliding_window, 4);
  EXPECT_TRUE(mistral->config().tied_output);
  const auto qwen3 = Model::load(fixture_dir("qwen3"));
  EXPECT_EQ(qwen3->config().head_dim, 24);
  EXPECT_EQ(qwen3->config().q_dim(), 96);
  const auto mixtral = Model::load(fixture_dir("mixtral"));
  EXPECT_EQ(mixtral->config().n_expert, 4);
  EXPECT_EQ(mixtral->config().n_expert_used, 2);
  EXPECT_EQ(mixtral->weights().layers[1].experts.size(), 4u);
  const auto qwen3moe = Model::load(fixture_dir("qwen3moe"));
  EXPECT_EQ(qwen3moe->config().n_ff, 16);  // moe_intermediate_size, not intermediate_size (48)
  EXPECT_EQ(qwen3moe->config().n_expert, 4);
  EXPECT_TRUE(qwen3moe->config().expert_weights_norm);
  EXPECT_NE(qwen3moe->weights().layers[0].q_norm, nullptr);
  const auto phi3 = Model::load(fixture_dir("phi3"));
  EXPECT_EQ(phi3->config().n_rot, 8);  // partial_rotary_factor 0.5 of head_dim 16
  EXPECT_EQ(phi3->config().sliding_window, 5);
  EXPECT_EQ(phi3->weights().layers[0].wk.n_out, phi3->config().kv_dim());  // a slice of qkv_proj
  const auto gemma3 = Model::load(fixture_dir("gemma3"));
  EXPECT_EQ(gemma3->config().local_layers, (std::vector<uint8_t>{1, 1, 1, 1, 1, 0}));
  EXPECT_EQ(gemma3->config().window(0), 4);
  EXPECT_EQ(gemma3->config().window(5), 0);
  EXPECT_FLOAT_EQ(gemma3->config().embed_scale, 8.0f);
  EXPECT_FLOAT_EQ(gemma3->config().attn_scale, 0.25f);
  const auto gpt2 = Model::load(fixture_dir("gpt2"));
  EXPECT_EQ(gpt2->config().n_ctx_train, 64);
  EXPECT_EQ(gpt2->weights().output.data, gpt2->weights().tok_embd.data);
  EXPECT_EQ(gpt2->vocab().eos_id, 2);
}

TEST(HfModels, LearnedPositionsBoundTheContext) {
  auto model = Model::load(fixture_dir("gpt2"));  // 64 positions
  CpuBackend backend({.n_threads = 1});
  ModelStage stage(model, backend, {.max_tokens = 8, .max_seqs = 1, .n_kv_blocks = 20, .kv_block_size = kBlock});
  std::vector<int32_t> table(20);
  for (int32_t i = 0; i < 20; ++i) table[static_cast<size_t>(i)] = i;
  const std::vector<int32_t> token = {5};
  const BatchSeq seq{.n_tokens = 1, .n_past = 64, .block_table = table};
  std::vector<float> logits(static_cast<size_t>(model->config().n_vocab));
  st_test::expect_error([&] { stage.forward({.tokens = token, .seqs = std::span(&seq, 1)}, nullptr, logits.data()); },
                        Errc::invalid_argument, {"position 64", "64 learned positions"});
}

TEST(HfModels, UnknownArchitectureListsTheSupportedOnes) {
  st_test::TempDir dir("hf_unknown");
  st_test::write_text(dir.file("config.json"), R"({"architectures": ["FooForCausalLM"], "model_type": "foo"})");
  st_test::expect_error([&] { Model::load(dir.path().string()); }, Errc::unsupported,
                        {"config.json", "FooForCausalLM", "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                         "Qwen3ForCausalLM", "MixtralForCausalLM", "Qwen3MoeForCausalLM", "Gemma3ForCausalLM",
                         "Gemma3ForConditionalGeneration", "Phi3ForCausalLM", "GraniteForCausalLM",
                         "GPT2LMHeadModel", "Lfm2ForCausalLM", "Mistral3ForConditionalGeneration"});
  st_test::write_text(dir.file("config.json"), R"({"model_type": "llama"})");
  st_test::expect_error([&] { Model::load(dir.path().string()); }, Errc::bad_format, {"config.json", "architectures"});
}

// The llama fixture's config with a replacement checkpoint.
void copy_config(const st_test::TempDir& dir, const std::function<void(nlohmann::json&)>& edit = {}) {
  std::ifstream in(fixture_dir("llama") + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  if (edit) edit(cfg);
  st_test::write_text(dir.file("config.json"), cfg.dump());
}

TEST(HfModels, MissingOrMisshapenTensorIsNamed) {
  st_test::TempDir dir("hf_missing");
  copy_config(dir);
  std::vector<uint8_t> embd(256 * 64 * 4);
  st_test::write_safetensors(dir.file("model.safetensors"), {{"model.embed_tokens.weight", "F32", {256, 64}, embd}});
  st_test::expect_error([&] { Model::load(dir.path().string()); }, Errc::bad_format, {"missing tensor 'model.norm.weight'"});
  st_test::write_safetensors(dir.file("model.safetensors"), {{"model.embed_tokens.weight", "F32", {64, 256}, embd}});
  st_test::expect_error([&] { Model::load(dir.path().string()); }, Errc::bad_format,
                        {"model.safetensors", "'model.embed_tokens.weight'", "[64, 256]", "expected [256, 64]"});
  st_test::write_safetensors(dir.file("model.safetensors"),
                             {{"model.embed_tokens.weight", "I32", {256, 64}, embd}});
  st_test::expect_error([&] { Model::load(dir.path().string()); }, Errc::unsupported,
                        {"'model.embed_tokens.weight'", "I32"});
}

TEST(HfModels, ConfigErrorsNameTheKey) {
  st_test::TempDir dir("hf_config");
  std::vector<uint8_t> embd(4);
  st_test::write_safetensors(dir.file("model.safetensors"), {{"x", "F32", {1}, embd}});
  copy_config(dir, [](nlohmann::json& c) { c.erase("hidden_size"); });
  st_test::expect_error([&] { Model::load(dir.path().string()); }, Errc::bad_format, {"config.json", "'hidden_size'"});
  copy_config(dir, [](nlohmann::json& c) { c["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 4.0}}; });
  st_test::expect_error([&] { Model::load(dir.path().string()); }, Errc::unsupported,
                        {"rope type 'dynamic'", "default, linear, llama3, longrope, yarn"});
  copy_config(dir, [](nlohmann::json& c) { c["hidden_act"] = "gelu"; });
  st_test::expect_error([&] { Model::load(dir.path().string()); }, Errc::unsupported, {"hidden_act 'gelu'"});
  copy_config(dir, [](nlohmann::json& c) { c["num_key_value_heads"] = 3; });
  st_test::expect_error([&] { Model::load(dir.path().string()); }, Errc::bad_format, {"num_key_value_heads 3"});
}

TEST(HfModels, Llama3FactorsAtTheBandEdges) {
  // Worked by hand from the Llama 3.1 formula: theta 10000, n_rot 8 gives
  // wavelengths 2*pi*{1, 10, 100, 1000}; with an original context of 64,
  // low_freq_factor 1 and high_freq_factor 4 the bands are < 16 (kept),
  // > 64 (divided by 8) and, between, smooth = (64 / wavelen - 1) / 3.
  const std::vector<float> f = llama3_freq_factors(8, 10000.0, 8.0, 1.0, 4.0, 64.0);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  const double s = (64.0 / (2 * std::numbers::pi * 10.0) - 1.0) / 3.0;
  EXPECT_FLOAT_EQ(f[1], static_cast<float>(1.0 / ((1.0 - s) / 8.0 + s)));
  EXPECT_FLOAT_EQ(f[2], 8.0f);
  EXPECT_FLOAT_EQ(f[3], 8.0f);
}

// YaRN by hand: base 100, 16 rotated dims, original context 32. Pair i turns
// 32 / (2 pi 100^(i/8)) times over it, so beta_fast 32 puts the ramp's
// start below pair 0 (floor, clamped: 0) and beta_slow 1 its end at
// ceil(8 ln(32 / 2 pi) / ln 100) = 3: pair 0 keeps its frequency, pairs
// 1 and 2 blend 2/3 and 1/3 of it with the divided one, 3 on are divided by 4.
TEST(HfModels, YarnFactorsAtTheRampEnds) {
  const std::vector<float> f = yarn_freq_factors(16, 100.0, {.factor = 4.0, .original_ctx = 32.0});
  ASSERT_EQ(f.size(), 8u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], static_cast<float>(1.0 / (2.0 / 3.0 + 1.0 / 3.0 / 4.0)));
  EXPECT_FLOAT_EQ(f[2], static_cast<float>(1.0 / (1.0 / 3.0 + 2.0 / 3.0 / 4.0)));
  for (size_t i = 3; i < f.size(); ++i) EXPECT_FLOAT_EQ(f[i], 4.0f) << i;
  EXPECT_DOUBLE_EQ(yarn_mscale(4.0), 0.1 * std::log(4.0) + 1.0);
  EXPECT_DOUBLE_EQ(yarn_mscale(0.5), 1.0);
}

// The qwen2_yarn fixture's frequencies and attention factor, from its
// config.json and from llama.cpp's conversion, are transformers' (its
// logits are held to transformers by HfArch and GgufConversion).
TEST(HfModels, YarnFromEitherFileIsTransformersRope) {
  const auto ref = reference("qwen2_yarn");
  const auto inv_freq = ref["inv_freq"].get<std::vector<double>>();
  const std::string gguf = std::string(TROUPE_FIXTURES_DIR) + "/gguf/qwen2_yarn.gguf";
  for (const std::string& path : {fixture_dir("qwen2_yarn"), gguf}) {
    SCOPED_TRACE(path);
    const auto model = Model::load(path);
    const ModelConfig& c = model->config();
    EXPECT_NEAR(c.rope_mscale, ref["attention_factor"].get<double>(), 1e-6);
    ASSERT_EQ(c.rope_freq_factors.size(), inv_freq.size());
    for (size_t i = 0; i < inv_freq.size(); ++i) {
      const double got = std::pow(double(c.rope_theta), -2.0 * double(i) / double(c.n_rot)) / c.rope_freq_factors[i];
      EXPECT_NEAR(got / inv_freq[i], 1.0, 1e-6) << "pair " << i;
    }
  }
}

}  // namespace
}  // namespace troupe
