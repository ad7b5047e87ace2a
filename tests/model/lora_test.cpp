// LoRA adapters (model/lora.hpp) against PEFT: the adapters of
// tests/fixtures/lora/ (tools/fixtures/make_lora_fixtures.py), made and run by
// PEFT over the tiny transformers models of tests/fixtures/hf/, loaded as
// PEFT directories over those models and, converted by llama.cpp's
// convert_lora_to_gguf.py, as adapter GGUFs over the models' own llama.cpp
// conversions. Also the CPU backend's unmerged update on every matmul path,
// and the errors for adapters that do not fit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/model.hpp"
#include "model/model_identity.hpp"
#include "model/model_stage.hpp"
#include "model/quant_scheme.hpp"
#include "safetensors_test_util.hpp"
#include "tests/exact_math.hpp"
#include "tests/model/hf_reference_run.hpp"

namespace troupe {
namespace {

using hf_test::expect_reference_batch;
using hf_test::fixture_dir;

std::string lora_dir(const std::string& name) { return std::string(TROUPE_FIXTURES_DIR) + "/lora/" + name; }
std::string gguf_base(const std::string& arch) { return std::string(TROUPE_FIXTURES_DIR) + "/gguf/" + arch + ".gguf"; }

nlohmann::json lora_reference(const std::string& name) {
  std::ifstream in(lora_dir(name) + "/reference.json");
  EXPECT_TRUE(in) << "missing fixture " << name;
  return in ? nlohmann::json::parse(in) : nlohmann::json{};
}

ModelLoadOptions with_lora(std::vector<LoraAdapterSpec> specs) {
  ModelLoadOptions o;
  o.lora = std::move(specs);
  return o;
}

// PEFT directories over Hugging Face models: logits within the forward
// tests' tolerance, the same greedy tokens. Each adapter moves the logits
// by several units (max_diff_from_base), far past it.
class LoraPeft : public testing::TestWithParam<const char*> {};

TEST_P(LoraPeft, MatchesPeft) {
  const auto ref = lora_reference(GetParam());
  ASSERT_GT(ref["max_diff_from_base"].get<float>(), 1.0f);
  auto model = Model::load(fixture_dir(ref["base"].get<std::string>()), with_lora({{.path = lora_dir(GetParam())}}));
  expect_reference_batch(model, ref);
}

// llama: every projection; phi3_rslora: row slices of fused qkv_proj and
// gate_up_proj, rsLoRA's alpha / sqrt(r); qwen2_attn: one layer, over biases.
INSTANTIATE_TEST_SUITE_P(Adapters, LoraPeft, testing::Values("llama", "phi3_rslora", "qwen2_attn"),
                         [](const testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

// llama.cpp's adapter GGUFs over llama.cpp's conversions of the same
// models (its Q/K rows permuted for llama, B's rows with them).
class LoraGguf : public testing::TestWithParam<const char*> {};

TEST_P(LoraGguf, MatchesPeft) {
  const auto ref = lora_reference(GetParam());
  auto model =
      Model::load(gguf_base(ref["base"].get<std::string>()), with_lora({{.path = lora_dir(GetParam()) + ".gguf"}}));
  expect_reference_batch(model, ref);
}

INSTANTIATE_TEST_SUITE_P(Adapters, LoraGguf, testing::Values("llama", "qwen2_attn"),
                         [](const testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

// The user's scale multiplies the adapter's: at 0 the base model's
// reference holds; two halves of one adapter are the whole of it.
TEST(Lora, ScaleMultipliesTheUpdate) {
  const std::string peft = lora_dir("llama");
  expect_reference_batch(Model::load(fixture_dir("llama"), with_lora({{.path = peft, .scale = 0.0f}})),
                         hf_test::reference("llama"));
  expect_reference_batch(
      Model::load(fixture_dir("llama"), with_lora({{.path = peft, .scale = 0.5f}, {.path = peft, .scale = 0.5f}})),
      lora_reference("llama"));
}

// A remote worker must run the head's adapters: they are part of the
// identity the handshake compares, scale included.
TEST(Lora, AdaptersArePartOfTheModelIdentity) {
  const std::string base = fixture_dir("llama");
  const std::string plain = model_identity(*Model::load(base));
  const std::string adapted = model_identity(*Model::load(base, with_lora({{.path = lora_dir("llama")}})));
  const std::string half = model_identity(*Model::load(base, with_lora({{.path = lora_dir("llama"), .scale = 0.5f}})));
  EXPECT_NE(plain, adapted);
  EXPECT_NE(adapted, half);
  EXPECT_EQ(adapted, model_identity(*Model::load(base, with_lora({{.path = lora_dir("llama")}}))));
}

// --quantize converts the base weights and keeps their updates: with
// exact math, PEFT's logits over the base rounded as q8_0 (gguf-py's
// quantizer) hold to the same tolerance.
TEST(Lora, SurvivesQuantizingAtLoad) {
  const test::ExactMath exact;
  const auto ref = lora_reference("llama");
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  ModelLoadOptions q = with_lora({{.path = lora_dir("llama")}});
  q.quantize = parse_quant_scheme("q8_0");
  auto adapted = Model::load(fixture_dir("llama"), q);
  EXPECT_NE(adapted->weights().layers[1].w_down.lora, nullptr);
  EXPECT_EQ(adapted->weights().layers[1].w_down.type, DType::q8_0);
  CpuBackend backend({.n_threads = 2});
  ModelStage stage(adapted, backend, hf_test::stage_options(prompts.size()));
  const auto run = hf_test::run_batched(adapted, prompts, 0, {&stage});
  hf_test::expect_matches(ref["q8_0_base"], run, adapted->config().n_vocab, hf_test::kTolerance);
}

// The backend's update on each matmul path (f32 packed, int8 packed alone
// and fused in matmul_n, exact): y with the update minus y without it is
// (x a^T) b^T of this matrix's rows of b, to float rounding. Small sizes run
// on the calling thread, large ones split over the pool (by tokens, and by
// parts of y's row that the last does not fill), with the same values.
struct LoraShape {
  int64_t n_in, n_out, rank, tokens;
};

class LoraMatmul : public testing::TestWithParam<LoraShape> {};

TEST_P(LoraMatmul, EveryPathAddsTheUpdate) {
  const auto [n_in, n_out, rank, n_tokens] = GetParam();
  constexpr int64_t kRow0 = 16;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto draw = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng);
    return v;
  };
  // b: B [rows, rank], this matrix its rows kRow0 on; bt: B^T.
  const int64_t rows = kRow0 + n_out + 5;
  const std::vector<float> w32 = draw(n_out * n_in), x = draw(n_tokens * n_in), a = draw(rank * n_in),
                           b = draw(rows * rank);
  std::vector<float> bt(b.size());
  for (int64_t o = 0; o < rows; ++o) {
    for (int64_t k = 0; k < rank; ++k) bt[k * rows + o] = b[o * rank + k];
  }
  std::vector<uint8_t> w8(static_cast<size_t>(row_bytes(DType::q8_0, n_in) * n_out));
  for (int64_t r = 0; r < n_out; ++r) {
    quantize_row(DType::q8_0, w32.data() + r * n_in, w8.data() + r * row_bytes(DType::q8_0, n_in), n_in);
  }
  const LoraDelta delta{.a = a.data(), .bt = bt.data(), .rank = rank, .rows = rows};
  // want[t][o] = sum_k (x_t . a_k) b[kRow0 + o][k]
  std::vector<double> want(static_cast<size_t>(n_tokens * n_out), 0.0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t k = 0; k < rank; ++k) {
      double xa = 0;
      for (int64_t i = 0; i < n_in; ++i) xa += double(x[t * n_in + i]) * a[k * n_in + i];
      for (int64_t o = 0; o < n_out; ++o) want[t * n_out + o] += xa * b[(kRow0 + o) * rank + k];
    }
  }
  CpuBackend backend({.n_threads = 2});
  auto check = [&](const char* path, const Weight& w, bool fused) {
    Weight adapted = w;
    adapted.lora = &delta;
    adapted.lora_row0 = kRow0;
    std::vector<float> plain(static_cast<size_t>(n_tokens * n_out)), with(plain.size()), other(plain.size());
    if (fused) {
      const Backend::MatmulOut outs[] = {{.y = with.data(), .w = &adapted}, {.y = other.data(), .w = &w}};
      backend.matmul_n(outs, x.data(), n_tokens);
    } else {
      backend.matmul(with.data(), x.data(), adapted, n_tokens);
    }
    backend.matmul(plain.data(), x.data(), w, n_tokens);
    for (size_t i = 0; i < plain.size(); ++i) {
      ASSERT_NEAR(with[i] - plain[i], want[i], 1e-3 * (1.0 + std::fabs(want[i]))) << path << " element " << i;
      if (fused) {
        ASSERT_EQ(other[i], plain[i]) << path << ": the matrix without an update took one";
      }
    }
  };
  const Weight f32{.data = w32.data(), .type = DType::f32, .n_in = n_in, .n_out = n_out};
  const Weight q8{.data = w8.data(), .type = DType::q8_0, .n_in = n_in, .n_out = n_out};
  check("f32 unpacked", f32, false);
  const Weight f32_packed = backend.prepare_matmul(f32);
  const Weight q8_packed = backend.prepare_matmul(q8);
  check("f32 packed", f32_packed, false);
  check("q8_0 packed", q8_packed, false);
  check("q8_0 packed, matmul_n", q8_packed, true);
  check("q8_0 unpacked", q8, false);
  for (const Weight& p : {f32_packed, q8_packed}) {
    if (p.packed != nullptr) backend.deallocate(const_cast<void*>(p.packed));
  }
}

// Inline (small); then factors of 16 x (64 + 4160) floats, 270 KB, split
// by y's rows (65 parts of 64) over 1 and 9 tokens (the second also split
// by tokens); and 4170 rows, whose 66th part has 10.
INSTANTIATE_TEST_SUITE_P(Shapes, LoraMatmul,
                         testing::Values(LoraShape{64, 48, 3, 5}, LoraShape{64, 4160, 16, 1},
                                         LoraShape{64, 4160, 16, 9}, LoraShape{96, 4170, 16, 3}),
                         [](const testing::TestParamInfo<LoraShape>& p) {
                           return std::to_string(p.param.n_in) + "x" + std::to_string(p.param.n_out) + "_r" +
                                  std::to_string(p.param.rank) + "_t" + std::to_string(p.param.tokens);
                         });

// A backend that does not run the updates (the CUDA one) refuses a stage
// with adapters when its weights are uploaded, rather than running the base
// model silently.
TEST(Lora, BackendWithoutLoraRefusesTheStage) {
  struct NoLora : CpuBackend {
    bool runs_lora() const override { return false; }
  };
  auto model = Model::load(fixture_dir("llama"), with_lora({{.path = lora_dir("llama")}}));
  NoLora backend;
  st_test::expect_error([&] { ModelStage stage(model, backend, hf_test::stage_options(1)); }, Errc::unsupported,
                        {"LoRA adapters (--lora) run on cpu stages"});
  ModelStage plain(Model::load(fixture_dir("llama")), backend, hf_test::stage_options(1));
}

// Adapters that do not fit are refused at load, naming what is wrong.
TEST(Lora, RefusesWhatDoesNotFit) {
  using st_test::expect_error;
  const std::string hf = fixture_dir("llama");
  auto load = [](const std::string& model, std::vector<LoraAdapterSpec> specs) {
    return [=] { Model::load(model, with_lora(specs)); };
  };
  // The other format's adapter, each way.
  expect_error(load(gguf_base("llama"), {{.path = lora_dir("llama")}}), Errc::unsupported,
               {"PEFT adapter", "convert_lora_to_gguf.py"});
  expect_error(load(hf, {{.path = lora_dir("llama") + ".gguf"}}), Errc::unsupported, {"PEFT adapter directory"});
  // Another model's: Qwen2's adapter GGUF names its architecture; Llama's
  // PEFT adapter over Qwen2, whose MLP is twice as wide, a shape.
  expect_error(load(gguf_base("llama"), {{.path = lora_dir("qwen2_attn") + ".gguf"}}), Errc::invalid_argument,
               {"architecture 'qwen2'", "'llama'"});
  expect_error(load(fixture_dir("qwen2"), {{.path = lora_dir("llama")}}), Errc::bad_format,
               {"mlp.gate_proj", "[32, 64]", "[64, 64]", "another model"});
  expect_error(load(hf, {{.path = lora_dir("missing")}}), Errc::io, {"no such LoRA adapter"});
  expect_error(load(hf, {{.path = lora_dir("llama"), .scale = NAN}}), Errc::invalid_argument, {"finite"});

  // Edited adapters: llama's config beside tensors of our own.
  const st_test::TempDir dir("lora");
  auto adapter = [&](const std::string& name, const std::vector<st_test::Tensor>& tensors, bool dora = false) {
    const auto d = dir.path() / name;
    std::filesystem::create_directories(d);
    std::ifstream in(lora_dir("llama") + "/adapter_config.json");
    auto cfg = nlohmann::json::parse(in);
    cfg["use_dora"] = dora;
    st_test::write_text((d / "adapter_config.json").string(), cfg.dump());
    st_test::write_safetensors((d / "adapter_model.safetensors").string(), tensors);
    return d.string();
  };
  auto f32 = [](const std::string& name, int64_t rows, int64_t cols) {
    return st_test::Tensor{.name = "base_model.model." + name,
                           .dtype = "F32",
                           .shape = {rows, cols},
                           .bytes = st_test::as_bytes(std::vector<float>(static_cast<size_t>(rows * cols), 0.5f))};
  };
  expect_error(load(hf, {{.path = adapter("dora", {}, /*dora=*/true)}}), Errc::unsupported, {"DoRA"});
  // A matrix the model does not have.
  expect_error(
      load(hf, {{.path = adapter("unused", {f32("model.layers.0.self_attn.qkv_proj.lora_A.weight", 2, 64),
                                            f32("model.layers.0.self_attn.qkv_proj.lora_B.weight", 128, 2)})}}),
      Errc::unsupported, {"model.layers.0.self_attn.qkv_proj.weight", "not a matrix of this model"});
  // A without B.
  expect_error(load(hf, {{.path = adapter("lonely", {f32("model.layers.0.self_attn.q_proj.lora_A.weight", 2, 64)})}}),
               Errc::bad_format, {"q_proj", "lora_A without lora_B"});
  // Ranks that disagree.
  expect_error(load(hf, {{.path = adapter("ranks", {f32("model.layers.0.self_attn.q_proj.lora_A.weight", 2, 64),
                                                    f32("model.layers.0.self_attn.q_proj.lora_B.weight", 64, 3)})}}),
               Errc::bad_format, {"q_proj", "rank"});
  // PEFT's embedding update, and an A/B pair over the token embedding.
  expect_error(load(hf, {{.path = adapter("embedding", {f32("model.embed_tokens.lora_embedding_A", 2, 256)})}}),
               Errc::unsupported, {"lora_embedding_A", "not a LoRA A or B matrix"});
  expect_error(load(hf, {{.path = adapter("table", {f32("model.embed_tokens.lora_A.weight", 2, 64),
                                                    f32("model.embed_tokens.lora_B.weight", 256, 2)})}}),
               Errc::unsupported, {"token or position embedding"});
}

}  // namespace
}  // namespace troupe
