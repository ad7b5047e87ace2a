// Pre-quantized checkpoints (FP8, compressed-tensors' packed 4-bit): the
// e4m3 decoding and the block grids against torch (tests/fixtures/
// fp8_e4m3.json, from tools/fixtures/make_hf_quantized_models.py), the types
// the matrices load as, --quantize over them, and the errors a malformed or
// unsupported quantization_config or tensor gets. The fixtures' logits
// against transformers are HfArch's (hf_models_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/thread_pool.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/hf_8bit.hpp"
#include "model/hf_int4.hpp"
#include "model/hf_weights.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "model/quant_scheme.hpp"
#include "safetensors_test_util.hpp"
#include "tests/model/hf_reference_run.hpp"

namespace troupe {
namespace {

using namespace hf_test;  // NOLINT: the fixture helpers
using Json = nlohmann::json;

Json fp8_fixture() {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/fp8_e4m3.json");
  return Json::parse(in);
}

HfConfig config_with(const Json& quantization, const char* dtype = "bfloat16") {
  return HfConfig(Json{{"dtype", dtype}, {"quantization_config", quantization}}, "config.json");
}

TEST(Fp8, EveryE4m3ByteIsTorchsValue) {
  const Json table = fp8_fixture()["e4m3"];
  ASSERT_EQ(table.size(), 256u);
  for (int b = 0; b < 256; ++b) {
    const float got = e4m3_to_f32(static_cast<uint8_t>(b));
    if (table[static_cast<size_t>(b)].is_null()) {
      EXPECT_TRUE(std::isnan(got)) << b;
    } else {
      EXPECT_EQ(got, table[static_cast<size_t>(b)].get<float>()) << b;
    }
  }
}

// A 20x24 matrix in blocks of 8x16: the last row and column blocks are
// partial, as DeepSeek-V3's 576-row kv_a_proj_with_mqa is in blocks of 128.
TEST(Fp8, PartialBlocksAreTorchsValues) {
  const Json r = fp8_fixture()["ragged"];
  const auto bytes = r["bytes"].get<std::vector<uint8_t>>();
  const auto scale = r["scale"].get<std::vector<float>>();
  const auto want = r["values"].get<std::vector<float>>();
  safetensors::TensorInfo w{
      .name = "m.weight", .dtype = "F8_E4M3", .shape = {20, 24}, .data = bytes.data(), .n_bytes = 480};
  safetensors::TensorInfo s{.name = "m.weight_scale_inv",
                            .dtype = "F32",
                            .type = DType::f32,
                            .shape = {3, 2},
                            .data = reinterpret_cast<const uint8_t*>(scale.data()),
                            .n_bytes = 24};
  WeightStore store;
  ThreadPool pool(2);
  const HfQuantScheme scheme{.scale_suffix = "weight_scale_inv", .block_rows = 8, .block_cols = 16, .to = DType::f32};
  const Weight m = read_8bit(w, s, scheme, store, pool);
  ASSERT_EQ(m.type, DType::f32);
  const auto* got = static_cast<const float*>(m.data);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << i;
  // In bf16 (a release's dtype): each value rounded once.
  const Weight h = read_8bit(
      w, s, {.scale_suffix = "weight_scale_inv", .block_rows = 8, .block_cols = 16, .to = DType::bf16}, store, pool);
  const auto* half = static_cast<const uint16_t*>(h.data);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(half[i], f32_to_bf16(want[i])) << i;
  // A grid that names other blocks is refused with both shapes.
  s.shape = {2, 2};
  st_test::expect_error([&] { read_8bit(w, s, scheme, store, pool); }, Errc::bad_format,
                        {"'m.weight_scale_inv'", "[2, 2]", "8-bit matrix 'm.weight' [20, 24]", "[3, 2] (blocks of 8x16)"});
  s.shape = {3, 2};
  s.dtype = "I32";
  s.type.reset();
  st_test::expect_error([&] { read_8bit(w, s, scheme, store, pool); }, Errc::unsupported,
                        {"'m.weight_scale_inv'", "I32"});
}

TEST(Fp8, SchemesFromTheConfig) {
  const auto fp8 = read_quantization_config(
      config_with({{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"weight_block_size", {128, 64}}}));
  ASSERT_TRUE(fp8.has_value());
  EXPECT_EQ(fp8->scale_suffix, "weight_scale_inv");
  EXPECT_EQ(fp8->block_rows, 128);
  EXPECT_EQ(fp8->block_cols, 64);
  EXPECT_EQ(fp8->to, DType::bf16);
  const auto per_tensor =
      read_quantization_config(config_with({{"quant_method", "fp8"}, {"weight_block_size", nullptr}}, "float16"));
  ASSERT_TRUE(per_tensor.has_value());
  EXPECT_EQ(per_tensor->block_rows, 0);
  EXPECT_EQ(per_tensor->to, DType::f16);
  const Json block_group = {
      {"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "block"}, {"block_structure", {128, 128}}}}};
  const auto ct = read_quantization_config(config_with({{"quant_method", "compressed-tensors"},
                                                        {"format", "float-quantized"},
                                                        {"config_groups", {{"group_0", block_group}}}},
                                                       "float32"));
  ASSERT_TRUE(ct.has_value());
  EXPECT_EQ(ct->scale_suffix, "weight_scale");
  EXPECT_EQ(ct->block_rows, 128);
  EXPECT_EQ(ct->to, DType::f32);
  const Json int4_group = {
      {"weights",
       {{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 128}, {"symmetric", false}}}};
  const auto w4 = read_quantization_config(config_with({{"quant_method", "compressed-tensors"},
                                                        {"format", "pack-quantized"},
                                                        {"config_groups", {{"group_0", int4_group}}}}));
  ASSERT_TRUE(w4.has_value());
  EXPECT_EQ(w4->kind, HfQuantScheme::Kind::int4_packed);
  EXPECT_EQ(w4->group_size, 128);
  EXPECT_FALSE(w4->symmetric);
  const auto gptq = read_quantization_config(config_with({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", -1}}));
  ASSERT_TRUE(gptq.has_value());
  EXPECT_EQ(gptq->kind, HfQuantScheme::Kind::gptq);
  EXPECT_EQ(gptq->group_size, 0);   // a group per row
  EXPECT_EQ(gptq->zero_offset, 1);  // the first format: zeros stored minus 1
  const auto awq = read_quantization_config(
      config_with({{"quant_method", "awq"}, {"w_bit", 4}, {"q_group_size", 128}, {"zero_point", true}}));
  ASSERT_TRUE(awq.has_value());
  EXPECT_EQ(awq->kind, HfQuantScheme::Kind::awq);
  EXPECT_EQ(awq->group_size, 128);
  // Plain floats, and gpt-oss's MXFP4 (its architecture reads it).
  EXPECT_FALSE(read_quantization_config(HfConfig(Json{{"dtype", "bfloat16"}}, "c.json")).has_value());
  EXPECT_FALSE(read_quantization_config(config_with({{"quant_method", "mxfp4"}})).has_value());
  EXPECT_FALSE(
      read_quantization_config(config_with({{"quant_method", "compressed-tensors"}, {"format", "dense"}})).has_value());
}

TEST(Fp8, OtherMethodsAreRefusedByName) {
  st_test::expect_error(
      [] {
        read_quantization_config(config_with({{"quant_method", "bitsandbytes"}}));
      },
      Errc::unsupported, {"config.json", "'bitsandbytes'", "fp8", "gptq", "GGUF", "--quantize"});
  st_test::expect_error(
      [] {
        read_quantization_config(config_with({{"quant_method", "gptq"}, {"bits", 8}}));
      },
      Errc::unsupported, {"gptq with 8-bit", "supported: 4"});
  st_test::expect_error(
      [] {
        read_quantization_config(config_with({{"quant_method", "awq"}}));
      },
      Errc::bad_format, {"awq without 'bits'"});
  st_test::expect_error(
      [] {
        read_quantization_config(config_with({{"quant_method", "awq"}, {"w_bit", 4}, {"version", "gemv"}}));
      },
      Errc::unsupported, {"AWQ version 'gemv'", "gemm"});
  st_test::expect_error(
      [] {
        read_quantization_config(config_with({{"quant_method", "gptq"}, {"bits", 4}, {"checkpoint_format", "marlin"}}));
      },
      Errc::unsupported, {"checkpoint_format 'marlin'"});
  st_test::expect_error(
      [] {
        read_quantization_config(config_with({{"quant_method", "fp8"}, {"fmt", "e5m2"}}));
      },
      Errc::unsupported, {"e5m2", "e4m3"});
  st_test::expect_error(
      [] {
        read_quantization_config(config_with({{"quant_method", "compressed-tensors"}, {"format", "marlin-24"}}));
      },
      Errc::unsupported, {"'marlin-24'", "float-quantized", "int-quantized", "pack-quantized"});
  const Json int8_packed = {{"weights", {{"num_bits", 8}, {"type", "int"}, {"strategy", "channel"}}}};
  st_test::expect_error(
      [&] {
        read_quantization_config(config_with({{"quant_method", "compressed-tensors"},
                                              {"format", "pack-quantized"},
                                              {"config_groups", {{"group_0", int8_packed}}}}));
      },
      Errc::unsupported, {"'group_0'", "8-bit", "4-bit int"});
  const Json int8_group = {{"weights", {{"num_bits", 8}, {"type", "int"}, {"strategy", "channel"}}}};
  st_test::expect_error(
      [&] {
        read_quantization_config(config_with({{"quant_method", "compressed-tensors"},
                                              {"format", "float-quantized"},
                                              {"config_groups", {{"group_0", int8_group}}}}));
      },
      Errc::unsupported, {"'group_0'", "\"int\"", "8-bit float"});
  st_test::expect_error(
      [] {
        read_quantization_config(config_with({{"bits", 4}}));
      },
      Errc::bad_format, {"quant_method"});
  st_test::expect_error(
      [] {
        read_quantization_config(config_with({{"quant_method", "fp8"}, {"weight_block_size", {128, 0}}}));
      },
      Errc::bad_format, {"weight_block_size"});
  const Json no_structure = {{"weights", {{"num_bits", 8}, {"type", "float"}, {"strategy", "block"}}}};
  st_test::expect_error(
      [&] {
        read_quantization_config(config_with({{"quant_method", "compressed-tensors"},
                                              {"format", "float-quantized"},
                                              {"config_groups", {{"group_0", no_structure}}}}));
      },
      Errc::bad_format, {"'block_structure'"});
}

TEST(Fp8, MatrixWithoutItsScaleIsNamed) {
  st_test::TempDir dir("fp8_scale");
  std::vector<uint8_t> bytes(4 * 8, 0x38);  // 1.0
  st_test::write_safetensors(dir.file("model.safetensors"), {{"a.weight", "F8_E4M3", {4, 8}, bytes}});
  const auto ckpt = safetensors::Checkpoint::open_dir(dir.path().string());
  WeightStore store;
  HfWeights src(ckpt, store);
  // No quantization_config: the dtype is refused as before.
  st_test::expect_error([&] { src.matrix("a.weight", 8, 4); }, Errc::unsupported, {"'a.weight'", "F8_E4M3"});
  src.set_quantization({.scale_suffix = "weight_scale_inv", .to = DType::f32});
  st_test::expect_error([&] { src.matrix("a.weight", 8, 4); }, Errc::bad_format,
                        {"F8_E4M3 tensor 'a.weight'", "'a.weight_scale_inv'"});
  st_test::expect_error([&] { src.matrix("a.weight", 4, 8); }, Errc::bad_format, {"[4, 8]", "expected [8, 4]"});
}

// The fixtures keep their dtype (float32) in the dequantized matrices; a
// release's config says bfloat16, and its matrices are bf16.
TEST(Fp8, MatricesTakeTheCheckpointsDtype) {
  auto model = Model::load(fixture_dir("qwen3_fp8"));
  const LayerWeights& l = model->weights().layers[1];
  EXPECT_EQ(l.wq.type, DType::f32);
  EXPECT_EQ(l.w_down.type, DType::f32);
  auto moe = Model::load(fixture_dir("qwen3moe_fp8"));
  EXPECT_EQ(moe->weights().layers[0].experts[3].w_up.type, DType::f32);
  EXPECT_EQ(moe->weights().layers[0].ffn_router.type, DType::f32);  // stored unquantized

  st_test::TempDir dir("fp8_bf16");
  std::filesystem::copy_file(fixture_dir("qwen3_fp8") + "/model.safetensors", dir.file("model.safetensors"));
  std::ifstream in(fixture_dir("qwen3_fp8") + "/config.json");
  Json cfg = Json::parse(in);
  cfg["dtype"] = "bfloat16";
  st_test::write_text(dir.file("config.json"), cfg.dump());
  auto bf16 = Model::load(dir.path().string());
  EXPECT_EQ(bf16->weights().layers[1].wq.type, DType::bf16);
  EXPECT_EQ(bf16->weights().tok_embd.type, DType::f32);  // as stored: only FP8 matrices are converted
  // Each weight rounded once to bf16 (a relative 2^-9): measured 0.010-0.019
  // from the f32 model's logits on these prompts.
  const auto ref = reference("qwen3_fp8");
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  CpuBackend backend({.n_threads = 2});
  ModelStage stage(bf16, backend, stage_options(prompts.size()));
  const BatchRun run = run_batched(bf16, prompts, 0, {&stage});
  expect_matches(ref, run, bf16->config().n_vocab, 0.05f);
}

// --quantize over an FP8 checkpoint ends at the quantized size: the
// dequantized copies are freed once converted.
TEST(Fp8, QuantizingFreesTheDequantizedMatrices) {
  auto f32 = Model::load(fixture_dir("qwen3_fp8"));
  auto q8 = Model::load(fixture_dir("qwen3_fp8"), {.quantize = parse_quant_scheme("q8_0")});
  EXPECT_EQ(q8->weights().layers[0].wk.type, DType::q8_0);
  // f32: 4 bytes a weight; q8_0 34 bytes a block of 32 (4.25x less), and
  // the token embedding's q8_0 copy (mapped as f32 before) on top.
  EXPECT_LT(q8->stored_bytes(), f32->stored_bytes() / 2);
  const auto ref = reference("qwen3_fp8");
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  CpuBackend backend({.n_threads = 2});
  ModelStage stage(q8, backend, stage_options(prompts.size()));
  const BatchRun run = run_batched(q8, prompts, 0, {&stage});
  for (const float v : run.prompt_logits) ASSERT_TRUE(std::isfinite(v));
}

// 4-bit groups of 32 with fp16-exact scales load as q4_0 or q4_1, bit for
// bit: the file's size, those types' kernels. (HfArch holds their
// logits to transformers under exact math; the default int8 path is held to
// the q4_0 type's own bound in the kernel tests.)
TEST(Int4, SymmetricGroupsOf32AreQ4_0) {
  auto model = Model::load(fixture_dir("qwen3_w4a16"));
  const LayerWeights& l = model->weights().layers[1];
  EXPECT_EQ(l.wq.type, DType::q4_0);
  EXPECT_EQ(l.w_down.type, DType::q4_0);
  EXPECT_EQ(model->weights().tok_embd.type, DType::f32);  // an embedding is not a Linear
  // Asymmetric groups of 16 have no q4_0 form: floats.
  auto asym = Model::load(fixture_dir("llama_w4a16_asym"));
  EXPECT_EQ(asym->weights().layers[0].wv.type, DType::f32);
  // GPTQ's symmetric groups of 32 too; its act-order groups scatter over
  // the columns (floats); AWQ's zero points make q4_1 blocks.
  EXPECT_EQ(Model::load(fixture_dir("qwen3_gptq"))->weights().layers[0].wo.type, DType::q4_0);
  EXPECT_EQ(Model::load(fixture_dir("qwen3_gptq_act_order"))->weights().layers[0].wo.type, DType::f32);
  auto awq = Model::load(fixture_dir("qwen3_awq"));
  EXPECT_EQ(awq->weights().layers[1].w_gate.type, DType::q4_1);
  EXPECT_LT(awq->stored_bytes(), Model::load(fixture_dir("qwen3_gptq_act_order"))->stored_bytes() / 4);
}

TEST(Int4, PackedTensorsAreChecked) {
  st_test::TempDir dir("int4");
  // 4 rows of 32: a word holds 8 values; nibble 9 is the value 1.
  const std::vector<uint32_t> words(4 * 4, 0x99999999u);
  const std::vector<float> scale{0.5f, 0.25f, 1.0f, 2.0f};    // fp16-exact, one per row
  const std::vector<float> inexact{0.1f, 0.25f, 1.0f, 2.0f};  // 0.1 is not
  st_test::write_safetensors(dir.file("model.safetensors"),
                             {{"a.weight_packed", "I32", {4, 4}, st_test::as_bytes(words)},
                              {"a.weight_scale", "F32", {4, 1}, st_test::as_bytes(scale)},
                              {"b.weight_packed", "I32", {4, 4}, st_test::as_bytes(words)},
                              {"b.weight_scale", "F32", {4, 1}, st_test::as_bytes(inexact)},
                              {"c.weight_packed", "I32", {4, 3}, std::vector<uint8_t>(48)},
                              {"c.weight_scale", "F32", {4, 1}, st_test::as_bytes(scale)}});
  const auto ckpt = safetensors::Checkpoint::open_dir(dir.path().string());
  WeightStore store;
  HfWeights src(ckpt, store);
  src.set_quantization({.kind = HfQuantScheme::Kind::int4_packed, .scale_suffix = "weight_scale", .to = DType::f32});
  const Weight a = src.matrix("a.weight", 32, 4);
  ASSERT_EQ(a.type, DType::q4_0);
  std::vector<float> row(32);
  dequantize_row(DType::q4_0, static_cast<const uint8_t*>(a.data) + 3 * row_bytes(DType::q4_0, 32), row.data(), 32);
  for (const float v : row) EXPECT_EQ(v, 2.0f);
  const Weight b = src.matrix("b.weight", 32, 4);
  ASSERT_EQ(b.type, DType::f32);
  EXPECT_EQ(static_cast<const float*>(b.data)[0], 0.1f);
  st_test::expect_error([&] { src.matrix("c.weight", 32, 4); }, Errc::bad_format,
                        {"'c.weight_packed'", "I32 [4, 3]", "expected I32 [4, 4]"});
  src.set_quantization(
      {.kind = HfQuantScheme::Kind::int4_packed, .scale_suffix = "weight_scale", .symmetric = false, .to = DType::f32});
  st_test::expect_error([&] { src.matrix("a.weight", 32, 4); }, Errc::bad_format,
                        {"model.safetensors: quantized tensor 'a.weight_packed'", "no zero point"});
  src.set_quantization(
      {.kind = HfQuantScheme::Kind::int4_packed, .scale_suffix = "weight_scale", .group_size = 16, .to = DType::f32});
  st_test::expect_error([&] { src.matrix("a.weight", 32, 4); }, Errc::bad_format,
                        {"'a.weight_scale'", "[4, 1]", "expected a float [4, 2]"});
}

// int8 with a scale per row on fp16's grid is q8_0, the file's bytes; in
// groups of 16, floats. A -128 (which q8_0 leaves out) makes floats too.
TEST(Int8, RowsOfOneScaleAreQ8_0) {
  auto model = Model::load(fixture_dir("qwen3_w8a8"));
  EXPECT_EQ(model->weights().layers[1].wq.type, DType::q8_0);
  EXPECT_EQ(model->weights().layers[0].w_down.type, DType::q8_0);
  EXPECT_EQ(Model::load(fixture_dir("llama_w8a8_group"))->weights().layers[0].wk.type, DType::f32);

  std::vector<uint8_t> bytes(2 * 32, 0x05);  // 5
  const std::vector<float> scale{0.5f, 0.25f};
  safetensors::TensorInfo w{.name = "m.weight", .dtype = "I8", .shape = {2, 32}, .data = bytes.data(), .n_bytes = 64};
  safetensors::TensorInfo s{.name = "m.weight_scale", .dtype = "F32", .type = DType::f32, .shape = {2, 1},
                            .data = reinterpret_cast<const uint8_t*>(scale.data()), .n_bytes = 8};
  WeightStore store;
  ThreadPool pool(2);
  const HfQuantScheme scheme{.kind = HfQuantScheme::Kind::int8, .scale_suffix = "weight_scale", .to = DType::f32};
  const Weight q = read_8bit(w, s, scheme, store, pool);
  ASSERT_EQ(q.type, DType::q8_0);
  std::vector<float> row(32);
  dequantize_row(DType::q8_0, static_cast<const uint8_t*>(q.data) + row_bytes(DType::q8_0, 32), row.data(), 32);
  for (const float v : row) EXPECT_EQ(v, 1.25f);
  bytes[7] = 0x80;  // -128
  const Weight f = read_8bit(w, s, scheme, store, pool);
  ASSERT_EQ(f.type, DType::f32);
  EXPECT_EQ(static_cast<const float*>(f.data)[7], -64.0f);
  EXPECT_EQ(static_cast<const float*>(f.data)[32], 1.25f);
}

// A q4_1 block's minimum is -d x zero rounded once to fp16: where that
// product needs more than fp16's 11 bits, each value is off by at most half
// an fp16 step of the minimum (AWQ's fp16 kernels round as much).
TEST(Int4, Q4_1MinimumIsRoundedOnce) {
  st_test::TempDir dir("int4_q4_1");
  const float d = 1.0009765625f;                      // 1 + 2^-10: on fp16's grid, its last bit set
  const std::vector<uint32_t> codes(4, 0x99999999u);  // every code 9
  const std::vector<uint32_t> zero{3u};               // row 0's zero point: 3
  st_test::write_safetensors(dir.file("model.safetensors"),
                             {{"a.weight_packed", "I32", {1, 4}, st_test::as_bytes(codes)},
                              {"a.weight_scale", "F32", {1, 1}, st_test::as_bytes(std::vector<float>{d})},
                              {"a.weight_zero_point", "I32", {1, 1}, st_test::as_bytes(zero)}});
  const auto ckpt = safetensors::Checkpoint::open_dir(dir.path().string());
  WeightStore store;
  HfWeights src(ckpt, store);
  src.set_quantization(
      {.kind = HfQuantScheme::Kind::int4_packed, .scale_suffix = "weight_scale", .symmetric = false, .to = DType::f32});
  const Weight a = src.matrix("a.weight", 32, 1);
  ASSERT_EQ(a.type, DType::q4_1);
  std::vector<float> row(32);
  dequantize_row(DType::q4_1, a.data, row.data(), 32);
  const float exact = 6.0f * d;                              // (9 - 3) d
  const float half_step = 3.0f * d * std::ldexp(1.0f, -11);  // half of fp16's relative step at |m|
  for (const float v : row) {
    EXPECT_NE(v, exact);  // 3 d needs 12 bits: the minimum was rounded
    EXPECT_LE(std::fabs(v - exact), half_step);
  }
}

}  // namespace
}  // namespace troupe
