// `--quantize` to a llama.cpp file type gives each matrix the type
// llama-quantize gives it. The goldens are files llama.cpp wrote: the tiny
// Q4_K_M/Q3_K_M/Q2_K/IQ4_XS fixtures (tools/fixtures/make_llamacpp_q4km_fixture.py),
// widened to f32 here and quantized again at load, and the type tables of
// Llama-3.2-1B-shaped files llama-quantize made (16 layers, 32 query and 8
// key/value heads, tied embedding; docs/performance.md's 1b-* bench models).
#include "model/quant_scheme.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "gguf_test_util.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/generator.hpp"
#include "model/gguf.hpp"
#include "model/gguf_writer.hpp"
#include "model/model.hpp"
#include "model/weight_store.hpp"
#include "tests/exact_math.hpp"

namespace troupe {
namespace {

std::string fixture(const std::string& name) { return std::string(TROUPE_FIXTURES_DIR) + "/" + name; }

// A copy of a GGUF file with every tensor dequantized to f32 (the llama.cpp
// file's values, not its types): the float checkpoint a user would quantize.
std::string widened_copy(const std::string& src, const std::string& name) {
  const auto f = gguf::GgufFile::open(src);
  gguf::GgufWriter w;
  for (const auto& [key, value] : f.metadata()) {
    if (key != "general.alignment" && key != "general.file_type") w.add(key, value);
  }
  for (const gguf::TensorInfo& t : f.tensors()) {
    const int64_t n_in = t.shape[0];
    const int64_t n_rows = t.n_elements() / n_in;
    std::vector<uint8_t> bytes(static_cast<size_t>(t.n_elements()) * sizeof(float));
    auto* out = reinterpret_cast<float*>(bytes.data());
    const auto* in = static_cast<const uint8_t*>(t.data);
    for (int64_t r = 0; r < n_rows; ++r) {
      dequantize_row(t.type, in + r * row_bytes(t.type, n_in), out + r * n_in, n_in);
    }
    w.add_tensor(t.name, DType::f32, t.shape, std::move(bytes));
  }
  const std::string path = gguf::test::temp_path(name);
  w.write(path);
  return path;
}

// label ("blk.0.attn_v") -> the type the loaded model holds it in.
std::map<std::string, DType> loaded_types(const Model& model) {
  ModelWeights w = model.weights();
  std::map<std::string, DType> out;
  for_each_matrix(w, [&](const std::string& label, Weight& m, bool) { out[label] = m.type; });
  return out;
}

struct LlamaCppFile {
  const char* file;
  const char* scheme;
};

class QuantizeLikeLlamaCpp : public testing::TestWithParam<LlamaCppFile> {};

// Every matrix of the float copy, quantized at load, takes the type the
// llama.cpp file stores it in. One layer of 4 query and 4 key/value heads,
// rows of 256: the output head q6_K, and the attn_v/ffn_down/attn_output
// rules of each file type.
TEST_P(QuantizeLikeLlamaCpp, EveryMatrixTakesTheFilesType) {
  const LlamaCppFile p = GetParam();
  const auto original = gguf::GgufFile::open(fixture(p.file));
  const std::string wide = widened_copy(fixture(p.file), p.scheme);
  auto model = Model::load(wide, {.quantize = parse_quant_scheme(p.scheme)});
  std::remove(wide.c_str());
  const auto types = loaded_types(*model);
  ASSERT_EQ(types.size(), 9u);  // token_embd, output, 7 per layer
  for (const auto& [label, type] : types) {
    EXPECT_EQ(dtype_name(type), dtype_name(original.tensor(label + ".weight").type)) << p.file << " " << label;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, QuantizeLikeLlamaCpp,
                         testing::Values(LlamaCppFile{"tiny_q4_k_m.gguf", "q4_k_m"},
                                         LlamaCppFile{"tiny_q3_k_m.gguf", "Q3_K_M"},
                                         LlamaCppFile{"tiny_q2_k.gguf", "q2_k"},
                                         LlamaCppFile{"tiny_iq4_xs.gguf", "iq4_xs"}),
                         [](const testing::TestParamInfo<LlamaCppFile>& p) { return std::string(p.param.scheme); });

// The Q4_K_M file's own values, quantized again at load: every sub-block
// already lies on a q4_K/q6_K grid, which Troupe's quantizer finds again, so
// the logits are the llama.cpp file's to float rounding, held to the 1e-4
// that kquant_model_test holds the file itself to against its numpy
// reference (tiny_q4_k_m_logits.json); measured 1e-6. A wrong type for one
// matrix (q4_K for the q6_K output head, say) or a wrong block writer moves
// them by 1e-2 or more.
TEST(QuantizeAtLoad, Q4KMOfTheFilesValuesKeepsItsLogits) {
  const test::ExactMath exact;
  std::ifstream in(fixture("tiny_q4_k_m_logits.json"));
  ASSERT_TRUE(in);
  const auto j = nlohmann::json::parse(in);
  const std::string wide = widened_copy(fixture("tiny_q4_k_m.gguf"), "q4_k_m_logits");
  auto model = Model::load(wide, {.quantize = parse_quant_scheme("q4_k_m")});
  auto f32 = Model::load(wide);
  std::remove(wide.c_str());
  CpuBackend backend({.n_threads = 2});
  Generator gen(model, backend, {.n_ctx = 64});
  Generator ref(f32, backend, {.n_ctx = 64});
  for (const auto& c : j["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const std::vector<float> want = c["reference"].get<std::vector<std::vector<float>>>().back();
    const std::vector<float> got = gen.prompt_logits(ids);
    const std::vector<float> wide_got = ref.prompt_logits(ids);
    ASSERT_EQ(got.size(), want.size());
    float worst = 0;
    float worst_wide = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, std::fabs(got[i] - want[i]));
      worst_wide = std::max(worst_wide, std::fabs(wide_got[i] - want[i]));
    }
    EXPECT_LT(worst_wide, 1e-4f) << "the f32 copy holds the file's values";
    EXPECT_LT(worst, 1e-4f) << "max |logit difference| over the vocabulary, prompt of " << ids.size() << " tokens";
  }
}

// The 1B tables (the files' tensor types, read with gguf-py).
TEST(QuantScheme, MatchesLlamaQuantizeOnALlama32_1BShape) {
  const QuantShape s{.n_layer = 16, .n_head = 32, .n_head_kv = 8, .n_expert = 0, .tied_output = true};
  auto type = [&](const char* scheme, const std::string& label, int64_t n_in = 2048) {
    return std::string(dtype_name(scheme_type(parse_quant_scheme(scheme), label, n_in, s)));
  };
  for (int i = 0; i < 16; ++i) {
    SCOPED_TRACE("layer " + std::to_string(i));
    const std::string b = "blk." + std::to_string(i) + ".";
    // Q4_K_M: q6_K for attn_v and ffn_down on llama.cpp's use_more_bits layers.
    const bool more = i < 2 || i >= 14 || (i - 2) % 3 == 2;
    EXPECT_EQ(type("q4_k_m", b + "attn_v"), more ? "q6_K" : "q4_K");
    EXPECT_EQ(type("q4_k_m", b + "ffn_down", 8192), more ? "q6_K" : "q4_K");
    EXPECT_EQ(type("q4_k_m", b + "attn_q"), "q4_K");
    EXPECT_EQ(type("q5_k_m", b + "attn_v"), more ? "q6_K" : "q5_K");
    EXPECT_EQ(type("q5_k_m", b + "ffn_up"), "q5_K");
    // Q3_K_M: attn_v q5_K in layers 0-1, ffn_down q5_K in layer 0.
    EXPECT_EQ(type("q3_k_m", b + "attn_v"), i < 2 ? "q5_K" : "q4_K");
    EXPECT_EQ(type("q3_k_m", b + "ffn_down", 8192), i < 1 ? "q5_K" : "q4_K");
    EXPECT_EQ(type("q3_k_m", b + "attn_output"), "q4_K");
    EXPECT_EQ(type("q3_k_m", b + "ffn_gate"), "q3_K");
    // Q2_K: 4 query heads per key/value head -> attn_v q4_K.
    EXPECT_EQ(type("q2_k", b + "attn_v"), "q4_K");
    EXPECT_EQ(type("q2_k", b + "ffn_down", 8192), "q3_K");
    EXPECT_EQ(type("q2_k", b + "attn_output"), "q3_K");
    EXPECT_EQ(type("q2_k", b + "attn_k"), "q2_K");
    // IQ4_XS: attn_v q5_K, ffn_down q5_K in the first eighth.
    EXPECT_EQ(type("iq4_xs", b + "attn_v"), "q5_K");
    EXPECT_EQ(type("iq4_xs", b + "ffn_down", 8192), i < 2 ? "q5_K" : "iq4_xs");
    EXPECT_EQ(type("iq4_xs", b + "ffn_up"), "iq4_xs");
    EXPECT_EQ(type("q6_k", b + "attn_v"), "q6_K");
  }
  // The tied embedding is the output head: q6_K in every mix.
  for (const char* scheme : {"q2_k", "q3_k_m", "q4_k_m", "q5_k_m", "q6_k", "iq4_nl", "iq4_xs"}) {
    EXPECT_EQ(type(scheme, "token_embd"), "q6_K") << scheme;
  }
  // Untied, it is a matrix like the others; the output head is q6_K.
  QuantShape untied = s;
  untied.tied_output = false;
  EXPECT_EQ(dtype_name(scheme_type(parse_quant_scheme("q4_k_m"), "token_embd", 2048, untied)), "q4_K");
  EXPECT_EQ(dtype_name(scheme_type(parse_quant_scheme("q4_k_m"), "output", 2048, untied)), "q6_K");
  // Plain types put every matrix in the one type.
  EXPECT_EQ(type("q4_0", "token_embd"), "q4_0");
  EXPECT_EQ(type("q8_0", "blk.3.attn_v"), "q8_0");
  EXPECT_EQ(type("mxfp4", "blk.3.ffn_down"), "mxfp4");
  EXPECT_EQ(type("mxfp4", "output"), "mxfp4");
}

TEST(QuantScheme, OtherShapesRules) {
  // Grouped-query attention under 4 query heads per key/value head: Q2_K's
  // attn_v stays q3_K and IQ4's stays iq4.
  const QuantShape mha{.n_layer = 32, .n_head = 32, .n_head_kv = 32};
  EXPECT_EQ(scheme_type(parse_quant_scheme("q2_k"), "blk.5.attn_v", 4096, mha), DType::q3_K);
  EXPECT_EQ(scheme_type(parse_quant_scheme("iq4_nl"), "blk.5.attn_v", 4096, mha), DType::iq4_nl);
  EXPECT_EQ(scheme_type(parse_quant_scheme("iq4_nl"), "blk.3.ffn_down", 4096, mha), DType::q5_K);
  EXPECT_EQ(scheme_type(parse_quant_scheme("iq4_nl"), "blk.4.ffn_down", 4096, mha), DType::iq4_nl);
  // 80 layers (the 70B): attn_v at least q5_K.
  const QuantShape big{.n_layer = 80, .n_head = 64, .n_head_kv = 8};
  EXPECT_EQ(scheme_type(parse_quant_scheme("q4_k_m"), "blk.20.attn_v", 8192, big), DType::q5_K);
  EXPECT_EQ(scheme_type(parse_quant_scheme("q3_k_m"), "blk.20.attn_v", 8192, big), DType::q5_K);
  // 8 experts (Mixtral): attn_v and attn_k q8_0, attn_output q5_K.
  const QuantShape moe{.n_layer = 32, .n_head = 32, .n_head_kv = 8, .n_expert = 8};
  EXPECT_EQ(scheme_type(parse_quant_scheme("q4_k_m"), "blk.0.attn_v", 4096, moe), DType::q8_0);
  EXPECT_EQ(scheme_type(parse_quant_scheme("q4_k_m"), "blk.0.attn_k", 4096, moe), DType::q8_0);
  EXPECT_EQ(scheme_type(parse_quant_scheme("q4_k_m"), "blk.9.attn_output", 4096, moe), DType::q5_K);
  EXPECT_EQ(scheme_type(parse_quant_scheme("q6_k"), "blk.9.attn_output", 4096, moe), DType::q6_K);
  EXPECT_EQ(scheme_type(parse_quant_scheme("q4_k_m"), "blk.9.ffn_up.expert.3", 4096, moe), DType::q4_K);
  EXPECT_EQ(scheme_type(parse_quant_scheme("q4_k_m"), "blk.31.ffn_down.expert.7", 14336, moe), DType::q6_K);
}

// Rows that 256 does not divide (SmolLM2's 576, a 64-wide test model) take
// llama.cpp's fallbacks; rows that 32 does not divide (stories260K's FFN of
// 172) stay f16.
TEST(QuantScheme, FallbacksForRowsNoSuperBlockDivides) {
  const QuantShape s{.n_layer = 30, .n_head = 9, .n_head_kv = 3, .tied_output = true};
  auto type = [&](const char* scheme, const char* label, int64_t n_in) {
    return scheme_type(parse_quant_scheme(scheme), label, n_in, s);
  };
  EXPECT_EQ(type("q4_k_m", "blk.5.attn_q", 576), DType::q5_0);
  EXPECT_EQ(type("q4_k_m", "blk.0.attn_v", 576), DType::q8_0);    // q6_K's fallback
  EXPECT_EQ(type("q4_k_m", "blk.0.ffn_down", 1536), DType::q6_K);  // 1536 = 6 x 256
  EXPECT_EQ(type("q4_k_m", "token_embd", 576), DType::q8_0);       // the output head
  EXPECT_EQ(type("q5_k_m", "blk.5.attn_q", 576), DType::q5_1);
  EXPECT_EQ(type("q2_k", "blk.5.attn_q", 576), DType::iq4_nl);
  EXPECT_EQ(type("q3_k_m", "blk.5.ffn_up", 576), DType::iq4_nl);
  EXPECT_EQ(type("iq4_xs", "blk.5.ffn_up", 576), DType::iq4_nl);
  EXPECT_EQ(type("q6_k", "blk.5.ffn_up", 576), DType::q8_0);
  EXPECT_EQ(type("q4_k_m", "blk.5.ffn_down", 172), DType::f16);
  EXPECT_EQ(type("q2_k", "blk.5.ffn_down", 172), DType::f16);
  EXPECT_EQ(type("iq4_nl", "blk.5.ffn_down", 172), DType::f16);
}

TEST(QuantScheme, NamesParseInEitherCase) {
  EXPECT_EQ(parse_quant_scheme("Q4_K_M").name, "q4_k_m");
  EXPECT_EQ(parse_quant_scheme("IQ4_XS").base, DType::iq4_xs);
  EXPECT_FALSE(parse_quant_scheme("bf16").mixed);
  EXPECT_TRUE(parse_quant_scheme("q6_k").mixed);
  EXPECT_EQ(parse_quant_scheme("MXFP4").base, DType::mxfp4);
  EXPECT_FALSE(parse_quant_scheme("mxfp4").mixed);
  for (const char* bad : {"", "q4_k", "q4_k_s", "iq2_xxs", "f32", "q8_0 "}) {
    try {
      parse_quant_scheme(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("supported: f16, bf16, q8_0"), std::string::npos) << e.what();
    }
  }
}

// stories260K (rows of 64 and 172) quantized to each mix loads, takes the
// fallbacks, and its greedy text from BOS still starts as published
// ("Once upon a time, there was a little girl named Lily."): 4-8 bit
// weights keep the argmax of a model this confident.
TEST(QuantizeAtLoad, Stories260KInEveryMixRuns) {
  const std::string path = std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  auto f32 = Model::load(path);
  CpuBackend backend({.n_threads = 2});
  const std::vector<int32_t> bos{1};
  Generator g0(f32, backend, {.n_ctx = 64});
  const auto want = g0.generate(bos, {.max_new_tokens = 12, .sampling = {.temperature = 0.0f}, .stop_tokens = {-1}});
  for (const char* scheme : {"q6_k", "q5_k_m", "q4_k_m"}) {
    SCOPED_TRACE(scheme);
    auto model = Model::load(path, {.quantize = parse_quant_scheme(scheme)});
    const auto types = loaded_types(*model);
    EXPECT_EQ(types.at("blk.0.ffn_down"), DType::f16);  // rows of 172
    EXPECT_NE(types.at("blk.0.ffn_up"), DType::f32);
    EXPECT_LT(model->weight_bytes(), f32->weight_bytes() / 2);
    Generator g(model, backend, {.n_ctx = 64});
    EXPECT_EQ(g.generate(bos, {.max_new_tokens = 12, .sampling = {.temperature = 0.0f}, .stop_tokens = {-1}}), want);
  }
}

}  // namespace
}  // namespace troupe
