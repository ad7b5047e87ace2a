// Q4_K_M and Q3_K_M files written by llama.cpp's own quantizer
// (tests/fixtures/tiny_q4_k_m.gguf, tiny_q3_k_m.gguf: a random-weight 1-layer
// llama, dim 256, vocab 300, made by tools/fixtures/make_llamacpp_q4km_fixture.py)
// run through Troupe's forward pass and give the logits that the `gguf`
// package's dequantization and a float64 numpy forward pass give. This checks
// the k-quant block layouts on bytes Troupe did not write, and the k-quant
// kernels inside a model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/cpu_backend.hpp"
#include "model/generator.hpp"
#include "model/gguf.hpp"
#include "model/model.hpp"
#include "tests/exact_math.hpp"

namespace troupe {
namespace {

const std::string kModel = std::string(TROUPE_FIXTURES_DIR) + "/tiny_q4_k_m.gguf";

TEST(KQuantModel, FileHasLlamaCppQ4KMMix) {
  const auto f = gguf::GgufFile::open(kModel);
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight").type, DType::q4_K);
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").type, DType::q6_K);
  EXPECT_EQ(f.tensor("output.weight").type, DType::q6_K);
  EXPECT_EQ(f.tensor("token_embd.weight").type, DType::q4_K);
}

// Float32 evaluation against float64: over a 256-wide model the logits (std
// ~0.3) differ by ~1e-6; 1e-4 is the stories260K bound of
// reference_fixture_test.cpp. A wrong nibble, scale or sub-block order moves
// them by 1e-2 or more.
void expect_logits_match_fixture(const std::string& model_file, const std::string& logits_file) {
  const test::ExactMath exact;  // a reference to float rounding
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/" + logits_file);
  ASSERT_TRUE(in) << "missing fixture " << logits_file;
  const auto j = nlohmann::json::parse(in);
  auto model = Model::load(model_file);
  CpuBackend backend({.n_threads = 2});
  Generator gen(model, backend, {.n_ctx = 64});
  ASSERT_GE(j["cases"].size(), 2u);
  for (const auto& c : j["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const auto rows = c["reference"].get<std::vector<std::vector<float>>>();
    const std::vector<float>& want = rows.back();
    const std::vector<float> got = gen.prompt_logits(ids);
    ASSERT_EQ(got.size(), want.size());
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    EXPECT_LT(worst, 1e-4f) << "max |logit difference| over the vocabulary, prompt of " << ids.size() << " tokens";
  }
}

TEST(KQuantModel, LogitsMatchGgufDequantizationAndNumpy) {
  expect_logits_match_fixture(kModel, "tiny_q4_k_m_logits.json");
}

// A Q3_K_M file from llama.cpp's llama-quantize (tests/fixtures/
// tiny_q3_k_m.gguf, same script): q3_K for the embedding, attn_q/k and
// ffn_gate/up, q4_K, q5_K and q6_K for the rest. Its q3_K tensors run as
// they are stored, at 3.44 bits a weight.
const std::string kQ3Model = std::string(TROUPE_FIXTURES_DIR) + "/tiny_q3_k_m.gguf";

TEST(KQuantModel, Q3KTensorsOpenAsStored) {
  const auto f = gguf::GgufFile::open(kQ3Model);
  for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_up.weight"}) {
    const gguf::TensorInfo& t = f.tensor(name);
    EXPECT_EQ(t.type, DType::q3_K) << name;
    EXPECT_EQ(t.n_bytes, t.n_elements() / kQK_K * 110) << name;
  }
  EXPECT_EQ(f.tensor("blk.0.attn_v.weight").type, DType::q5_K);
}

TEST(KQuantModel, Q3KMLogitsMatchGgufDequantizationAndNumpy) {
  expect_logits_match_fixture(kQ3Model, "tiny_q3_k_m_logits.json");
}

// A Q2_K file from llama.cpp's llama-quantize (tests/fixtures/tiny_q2_k.gguf,
// same script): q2_K for the embedding, attn_q/k and ffn_gate/up, q3_K for
// attn_v, attn_output and ffn_down, q6_K for the output.
const std::string kQ2Model = std::string(TROUPE_FIXTURES_DIR) + "/tiny_q2_k.gguf";

TEST(KQuantModel, Q2KFileHasLlamaCppMix) {
  const auto f = gguf::GgufFile::open(kQ2Model);
  for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_up.weight"}) {
    const gguf::TensorInfo& t = f.tensor(name);
    EXPECT_EQ(t.type, DType::q2_K) << name;
    EXPECT_EQ(t.n_bytes, t.n_elements() / kQK_K * 84) << name;
  }
  EXPECT_EQ(f.tensor("blk.0.ffn_down.weight").type, DType::q3_K);
  EXPECT_EQ(f.tensor("output.weight").type, DType::q6_K);
}

TEST(KQuantModel, Q2KLogitsMatchGgufDequantizationAndNumpy) {
  expect_logits_match_fixture(kQ2Model, "tiny_q2_k_logits.json");
}

// An IQ4_XS file from llama.cpp's llama-quantize (tests/fixtures/
// tiny_iq4_xs.gguf, same script): iq4_xs for every matrix but the output
// (q6_K). iq4_nl (the same levels in blocks of 32) is checked block by block
// in tests/kernels/kquant_test.cpp.
TEST(KQuantModel, IQ4XSFileHasLlamaCppMix) {
  const auto f = gguf::GgufFile::open(std::string(TROUPE_FIXTURES_DIR) + "/tiny_iq4_xs.gguf");
  for (const char* name : {"token_embd.weight", "blk.0.attn_v.weight", "blk.0.ffn_down.weight"}) {
    const gguf::TensorInfo& t = f.tensor(name);
    EXPECT_EQ(t.type, DType::iq4_xs) << name;
    EXPECT_EQ(t.n_bytes, t.n_elements() / kQK_K * 136) << name;
  }
  EXPECT_EQ(f.tensor("output.weight").type, DType::q6_K);
}

TEST(KQuantModel, IQ4XSLogitsMatchGgufDequantizationAndNumpy) {
  expect_logits_match_fixture(std::string(TROUPE_FIXTURES_DIR) + "/tiny_iq4_xs.gguf", "tiny_iq4_xs_logits.json");
}

// A real Q4_K_M file: SmolLM2-135M-Instruct requantized by llama.cpp (mostly
// q5_0, as llama.cpp gives rows of 576 weights; q4_K/q6_K for ffn_down, q8_0
// for the embedding). 105 MB, so not committed: set TROUPE_SMOLLM2_Q4_K_M to
// the file tools/fixtures/make_smollm2_q4km_reference.py writes. The
// reference is gguf-py's dequantization and a float64 numpy forward pass; the
// bound on logits (magnitude ~20) is reference_fixture_test's 1e-3 for
// SmolLM2 in f32.
TEST(KQuantModel, SmolLM2Q4KMFromLlamaCppMatchesNumpy) {
  const test::ExactMath exact;  // a reference to float rounding
  const char* path = std::getenv("TROUPE_SMOLLM2_Q4_K_M");
  if (path == nullptr || *path == '\0') {
    GTEST_SKIP() << "TROUPE_SMOLLM2_Q4_K_M is not set (a 105 MB file made by "
                    "tools/fixtures/make_smollm2_q4km_reference.py)";
  }
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/smollm2_q4_k_m_reference.json");
  ASSERT_TRUE(in) << "missing fixture smollm2_q4_k_m_reference.json";
  const auto j = nlohmann::json::parse(in);
  auto model = Model::load(path);
  CpuBackend backend({.n_threads = 2});
  Generator gen(model, backend, {.n_ctx = 256});
  for (const auto& c : j["cases"]) {
    const auto ids = c["prompt_ids"].get<std::vector<int32_t>>();
    const std::vector<float> got = gen.prompt_logits(ids);
    const auto top_ids = c["top_ids"].get<std::vector<int64_t>>();
    const auto top = c["top_logits"].get<std::vector<float>>();
    for (size_t i = 0; i < top_ids.size(); ++i) {
      EXPECT_NEAR(got[static_cast<size_t>(top_ids[i])], top[i], 1e-3f) << "token " << top_ids[i];
    }
    const auto want = c["greedy_ids"].get<std::vector<int32_t>>();
    const auto out = gen.generate(ids, {.max_new_tokens = static_cast<int64_t>(want.size()),
                                        .sampling = {.temperature = 0.0f},
                                        .stop_tokens = {-1}});
    EXPECT_EQ(out, want);
  }
}

}  // namespace
}  // namespace troupe
