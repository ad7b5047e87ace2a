// Whole forward steps on the CUDA backend against the CPU backend, through
// the model code (ModelStage) both share: a small random Llama (weights
// rounded to bf16, so the GPU's bf16 copies are the CPU's f32 values
// exactly), batched prefill and decode, CUDA graphs replaying the decode
// steps; and, where the file is present, stories260K decoded greedily for
// 200 tokens giving the CPU's tokens.
// Tolerances: steps of <= 8 tokens run in fp32 on both sides (the GEMV keeps
// f32 activations): 1e-4 relative to the largest logit. Longer steps use
// 16-bit GEMM inputs (and leave 16-bit-rounded keys and values in the cache
// for the decode steps after them): 3e-2 of the largest logit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/generator.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "model/pooling.hpp"

namespace troupe {
namespace {

// A Llama-shaped model with random weights held in host memory.
class TinyLlama final : public Model {
 public:
  explicit TinyLlama(uint32_t seed) {
    ModelConfig& c = config_;
    c.arch = "llama";
    c.name = "tiny-llama";
    c.n_vocab = 96;
    c.n_embd = 64;
    c.n_layer = 2;
    c.n_head = 4;
    c.n_head_kv = 2;
    c.head_dim = 16;
    c.n_ff = 160;
    c.n_ctx_train = 1024;
    c.norm_eps = 1e-5f;
    c.rope_layout = kernels::RopeLayout::normal;
    c.n_rot = 16;
    c.rope_theta = 10000.0f;
    std::mt19937 rng(seed);
    weights_.tok_embd = matrix(rng, c.n_embd, c.n_vocab, 1.0f);
    weights_.output = matrix(rng, c.n_embd, c.n_vocab, 0.2f);
    weights_.output_norm = norm_weight(rng, c.n_embd);
    weights_.layers.resize(static_cast<size_t>(c.n_layer));
    for (LayerWeights& l : weights_.layers) {
      l.attn_norm = norm_weight(rng, c.n_embd);
      l.wq = matrix(rng, c.n_embd, c.q_dim(), 0.15f);
      l.wk = matrix(rng, c.n_embd, c.kv_dim(), 0.15f);
      l.wv = matrix(rng, c.n_embd, c.kv_dim(), 0.15f);
      l.wo = matrix(rng, c.q_dim(), c.n_embd, 0.15f);
      l.ffn_norm = norm_weight(rng, c.n_embd);
      l.w_gate = matrix(rng, c.n_embd, c.n_ff, 0.15f);
      l.w_up = matrix(rng, c.n_embd, c.n_ff, 0.15f);
      l.w_down = matrix(rng, c.n_ff, c.n_embd, 0.1f);
    }
  }

 private:
  Weight matrix(std::mt19937& rng, int64_t n_in, int64_t n_out, float scale) {
    std::vector<float>& v = data_.emplace_back(test::random_floats(rng, n_in * n_out, -scale, scale));
    for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
    return {.data = v.data(), .type = DType::f32, .n_in = n_in, .n_out = n_out};
  }
  const float* norm_weight(std::mt19937& rng, int64_t n) {
    return data_.emplace_back(test::random_floats(rng, n, 0.8f, 1.2f)).data();
  }
  std::vector<std::vector<float>> data_;  // the weights' storage
};

// A chain of stages (pipeline parallelism), each on its own backend: hidden
// states go to the host between them, as the executors pass them on.
struct Chain {
  std::vector<std::unique_ptr<ModelStage>> stages;
  std::vector<float> hidden_a, hidden_b;

  void forward(const BatchView& batch, float* logits) {
    const float* in = nullptr;
    for (size_t i = 0; i < stages.size(); ++i) {
      const bool last = i + 1 == stages.size();
      std::vector<float>& out = i % 2 == 0 ? hidden_a : hidden_b;
      if (!last) out.resize(static_cast<size_t>(batch.n_tokens() * stages[i]->model().config().n_embd));
      stages[i]->forward(batch, in, last ? logits : out.data());
      in = out.data();
    }
  }
};

// Layer ranges [0, split) on `first` and [split, n_layer) on `second`
// (split 0: the whole model on `first`).
Chain make_chain(const std::shared_ptr<const Model>& model, Backend& first, Backend* second, int64_t split) {
  const StageOptions base{.max_tokens = 128, .max_seqs = 4, .n_kv_blocks = 64, .kv_block_size = 16};
  Chain c;
  if (split == 0) {
    c.stages.push_back(std::make_unique<ModelStage>(model, first, base));
    return c;
  }
  StageOptions a = base, b = base;
  a.last_layer = split;
  b.first_layer = split;
  c.stages.push_back(std::make_unique<ModelStage>(model, first, a));
  c.stages.push_back(std::make_unique<ModelStage>(model, *second, b));
  return c;
}

// Two sequences through one prefill step (prompt lengths p0, p1), then
// n_decode steps of one token each; the logits of every step.
std::vector<std::vector<float>> run_steps(const std::shared_ptr<const Model>& model, Chain chain, int32_t p0,
                                          int32_t p1, int n_decode) {
  const ModelConfig& c = model->config();
  // Shuffled physical blocks: sequence 0 and 1 interleave in the pool.
  std::vector<int32_t> t0{5, 2, 9, 11, 0, 30}, t1{7, 1, 3, 20, 8, 40};
  std::mt19937 rng(9);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(c.n_vocab - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(p0 + p1));
  for (int32_t& t : tokens) t = tok(rng);
  std::vector<std::vector<float>> out;
  std::vector<BatchSeq> seqs{{.n_tokens = p0, .n_past = 0, .block_table = t0, .n_logits = 1},
                             {.n_tokens = p1, .n_past = 0, .block_table = t1, .n_logits = 1}};
  std::vector<float> logits(static_cast<size_t>(2 * c.n_vocab));
  chain.forward({.tokens = tokens, .seqs = seqs}, logits.data());
  out.push_back(logits);
  for (int s = 0; s < n_decode; ++s) {
    seqs[0] = {.n_tokens = 1, .n_past = p0 + s, .block_table = t0, .n_logits = 1};
    seqs[1] = {.n_tokens = 1, .n_past = p1 + s, .block_table = t1, .n_logits = 1};
    const std::vector<int32_t> next{tok(rng), tok(rng)};
    chain.forward({.tokens = next, .seqs = seqs}, logits.data());
    out.push_back(logits);
  }
  return out;
}

std::vector<std::vector<float>> run_steps(const std::shared_ptr<const Model>& model, Backend& backend, int32_t p0,
                                          int32_t p1, int n_decode) {
  return run_steps(model, make_chain(model, backend, nullptr, 0), p0, p1, n_decode);
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  double max_abs = 0;
  for (float v : want) max_abs = std::max(max_abs, std::abs(static_cast<double>(v)));
  EXPECT_LE(test::worst_ratio(got, want, rel * max_abs, 0.0), 1.0);
}

TEST(CudaModelStage, SmallStepsMatchTheCpuAndDecodeReplaysGraphs) {
  TROUPE_REQUIRE_GPU();
  auto model = std::make_shared<TinyLlama>(1);
  CpuBackend cpu({.n_threads = 2});
  CudaBackend gpu(test::small_options(true));
  CudaBackend eager(test::small_options(false));
  // Prompts of 3 and 5 tokens: every step has <= 8 tokens (fp32 GEMV path).
  const auto want = run_steps(model, cpu, 3, 5, 8);
  const auto got = run_steps(model, gpu, 3, 5, 8);
  const auto got_eager = run_steps(model, eager, 3, 5, 8);
  ASSERT_EQ(got.size(), want.size());
  for (size_t s = 0; s < want.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    expect_close(got[s], want[s], 1e-4);
    // A replayed graph runs the very kernels the eager path runs.
    EXPECT_EQ(got[s], got_eager[s]);
  }
  // Decode steps 1 and 2 run eagerly and get captured; the rest replay.
  EXPECT_GE(gpu.stats().graph_captures, 1);
  EXPECT_GE(gpu.stats().graph_replays, 5);
  EXPECT_EQ(eager.stats().graph_replays, 0);
}

TEST(CudaModelStage, PrefillThroughTheGemmPathMatchesTheCpu) {
  TROUPE_REQUIRE_GPU();
  auto model = std::make_shared<TinyLlama>(2);
  CpuBackend cpu({.n_threads = 2});
  CudaBackend gpu(test::small_options(true));
  // 37 + 50 prompt tokens: the prefill attention tiles and 16-bit GEMMs.
  const auto want = run_steps(model, cpu, 37, 50, 3);
  const auto got = run_steps(model, gpu, 37, 50, 3);
  for (size_t s = 0; s < want.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    expect_close(got[s], want[s], 3e-2);
  }
}

TEST(CudaModelStage, HybridChainOfCudaAndCpuStagesMatchesOneCpuStage) {
  TROUPE_REQUIRE_GPU();
  // Layer 0 on the GPU, layer 1 on the CPU (and the other way round): the
  // hidden states cross between devices through the host.
  auto model = std::make_shared<TinyLlama>(3);
  CpuBackend cpu({.n_threads = 2});
  CudaBackend gpu(test::small_options(true));
  const auto want = run_steps(model, cpu, 3, 5, 4);
  const auto gpu_first = run_steps(model, make_chain(model, gpu, &cpu, 1), 3, 5, 4);
  const auto cpu_first = run_steps(model, make_chain(model, cpu, &gpu, 1), 3, 5, 4);
  for (size_t s = 0; s < want.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    expect_close(gpu_first[s], want[s], 1e-4);
    expect_close(cpu_first[s], want[s], 1e-4);
  }
}

TEST(CudaModelStage, Stories260kGreedyDecodeGivesTheCpuTokens) {
  TROUPE_REQUIRE_GPU();
  const std::string path = std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "model file not present: " << path;
  auto model = Model::load(path);
  // f32 weights kept f32 and one token per step: fp32 throughout.
  CudaBackendOptions opt = test::small_options(true);
  opt.f32_weights = WeightPrecision::f32;
  CudaBackend gpu(opt);
  CpuBackend cpu({.n_threads = 2});
  const int32_t bos = model->vocab().bos_id;
  const GenerateRequest req{.max_new_tokens = 200, .sampling = {.temperature = 0.0f}};
  Generator gpu_gen(model, gpu, {.n_ctx = 512});
  Generator cpu_gen(model, cpu, {.n_ctx = 512});
  const auto got = gpu_gen.generate(std::span(&bos, 1), req);
  const auto want = cpu_gen.generate(std::span(&bos, 1), req);
  EXPECT_EQ(got, want);
  EXPECT_GT(gpu.stats().graph_replays, 100);
}

// Q4_K_M, Q3_K_M, Q2_K and IQ4_XS files that llama.cpp quantized, and the
// MXFP4 file gguf-py wrote (tests/fixtures, see
// tests/model/kquant_model_test.cpp) on the GPU: the k-quant GEMV (prompts of
// 4 and 7 tokens) and the embedding gather against gguf-py's dequantization
// and a float64 numpy forward pass. 1e-3 on logits of std ~0.3: the CPU holds
// 1e-4 in exact math; the GPU's sums run in another order, with FMAs.
TEST(CudaModelStage, LlamaCppKQuantFilesMatchTheNumpyReference) {
  TROUPE_REQUIRE_GPU();
  for (const char* name : {"tiny_q4_k_m", "tiny_q3_k_m", "tiny_q2_k", "tiny_iq4_xs", "tiny_mxfp4"}) {
    SCOPED_TRACE(name);
    const std::string dir = TROUPE_FIXTURES_DIR;
    std::ifstream in(dir + "/" + name + "_logits.json");
    ASSERT_TRUE(in) << "missing fixture " << name << "_logits.json";
    const auto j = nlohmann::json::parse(in);
    auto model = Model::load(dir + "/" + name + ".gguf");
    CudaBackend gpu(test::small_options(true));
    Generator gen(model, gpu, {.n_ctx = 64});
    for (const auto& c : j["cases"]) {
      const auto ids = c["ids"].get<std::vector<int32_t>>();
      const std::vector<float> want = c["reference"].back().get<std::vector<float>>();
      const std::vector<float> got = gen.prompt_logits(ids);
      ASSERT_EQ(got.size(), want.size());
      float worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
      EXPECT_LT(worst, 1e-3f) << "prompt of " << ids.size() << " tokens";
    }
  }
}

// The architectures beyond Llama (tests/fixtures/hf/<arch>/ and their GGUF
// conversions by llama.cpp, tests/model/gguf_archs_test.cpp) on the GPU with
// f32 weights and graphs: Qwen2's biases, Qwen3's q/k norms, both MoE
// routings, Gemma's embedding scale, GeGLU, sandwich norms and local layers,
// Phi-3's fused projections, partial RoPE and window, Granite's scales,
// gpt-oss's sinks, biased experts and clamped SwiGLU, OLMo 3's local layers, GLM-4's
// sandwich and half-head adjacent-pair RoPE, GLM-4.5's sigmoid routing,
// EXAONE 4's NoPE global layers,
// DeepSeek's latent attention (gathers, a 24-wide head).
// Against transformers at 1e-3 (the CPU holds 1e-4; the GPU sums in another
// order), and the CPU's greedy tokens.
TEST(CudaModelStage, EveryArchitectureMatchesTransformers) {
  TROUPE_REQUIRE_GPU();
  const std::string dir = TROUPE_FIXTURES_DIR;
  const std::vector<std::string> paths = {dir + "/gguf/qwen2.gguf", dir + "/gguf/qwen3.gguf",
                                          dir + "/gguf/mixtral.gguf", dir + "/gguf/qwen3moe.gguf",
                                          dir + "/gguf/gemma3.gguf",  dir + "/hf/gemma3",
                                          dir + "/hf/qwen3moe",       dir + "/hf/mistral",
                                          dir + "/gguf/phi3.gguf",    dir + "/hf/phi3",
                                          dir + "/gguf/granite.gguf", dir + "/gguf/phi3_longrope.gguf",
                                          dir + "/gguf/gemma2.gguf",  dir + "/hf/gemma2",
                                          dir + "/gguf/qwen2moe.gguf", dir + "/gguf/qwen2_yarn.gguf",
                                          dir + "/gguf/smollm3.gguf",  dir + "/gguf/olmo2.gguf",
                                          dir + "/gguf/starcoder2.gguf", dir + "/hf/gpt_oss",
                                          dir + "/hf/gpt_oss_mxfp4",   dir + "/gguf/olmo3.gguf",
                                          dir + "/gguf/glm4.gguf",     dir + "/gguf/glm4_moe.gguf",
                                          dir + "/gguf/exaone4.gguf",  dir + "/hf/deepseek_v2",
                                          dir + "/hf/deepseek_v3",     dir + "/gguf/ernie4_5_moe.gguf",
                                          dir + "/gguf/cohere2.gguf",  dir + "/gguf/lfm2.gguf",
                                          dir + "/hf/lfm2_conv_bias",  dir + "/gguf/lfm2_moe.gguf",
                                          dir + "/gguf/ministral3.gguf", dir + "/hf/mistral3",
                                          dir + "/gguf/glm4_moe_lite.gguf", dir + "/gguf/seed_oss.gguf",
                                          dir + "/hf/qwen3_vl", dir + "/hf/qwen3_vl_moe",
                                          dir + "/gguf/olmoe.gguf", dir + "/gguf/granitemoe.gguf",
                                          dir + "/gguf/hunyuan_dense.gguf", dir + "/gguf/minimax_m2.gguf",
                                          dir + "/gguf/apertus.gguf", dir + "/gguf/qwen3_next.gguf",
                                          dir + "/hf/qwen3_5", dir + "/gguf/qwen3_5_moe.gguf",
                                          dir + "/gguf/granite_hybrid.gguf", dir + "/hf/granite_hybrid_dense"};
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    const std::string arch = std::filesystem::path(path).stem().string();
    std::ifstream in(dir + "/hf/" + arch + "/reference.json");
    ASSERT_TRUE(in) << "missing reference for " << arch;
    const auto ref = nlohmann::json::parse(in);
    // phi3_longrope's prompts pass its original context: the long factors.
    auto model = Model::load(path, {.context_length = 48});
    CudaBackendOptions options = test::small_options(true);
    options.f32_weights = WeightPrecision::f32;
    CudaBackend gpu(options);
    CpuBackend cpu({.n_threads = 2});
    Generator on_gpu(model, gpu, {.n_ctx = 48, .prefill_chunk = 5, .kv_block_size = 4});
    Generator on_cpu(model, cpu, {.n_ctx = 48, .prefill_chunk = 5, .kv_block_size = 4});
    const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
    for (size_t i = 0; i < prompts.size(); ++i) {
      const auto want = ref["last_logits"][i].get<std::vector<float>>();
      const std::vector<float> got = on_gpu.prompt_logits(prompts[i]);
      ASSERT_EQ(got.size(), want.size());
      float worst = 0;
      for (size_t v = 0; v < got.size(); ++v) worst = std::max(worst, std::fabs(got[v] - want[v]));
      EXPECT_LT(worst, 1e-3f) << "prompt " << i;
      const GenerateRequest greedy{.max_new_tokens = 8, .sampling = {.temperature = 0.0f}, .stop_tokens = {-1}};
      EXPECT_EQ(on_gpu.generate(prompts[i], greedy), on_cpu.generate(prompts[i], greedy)) << "prompt " << i;
    }
  }
}

// Embedding models on the GPU (StageOptions::embedding_output): each text of
// the sentence-transformers fixtures fed in chunks of 8 tokens (the fp32
// GEMV path), its rows pooled, against sentence-transformers' vectors.
TEST(CudaModelStage, EmbeddingModelsMatchSentenceTransformers) {
  TROUPE_REQUIRE_GPU();
  for (const std::string name :
       {"qwen3_embedding", "llama_embedding_mean", "bert_embedding_cls", "bert_embedding_mean",
        "xlm_roberta_embedding_mean", "nomic_bert_embedding_mean", "distilbert_embedding_mean"}) {
    SCOPED_TRACE(name);
    const std::string dir = std::string(TROUPE_FIXTURES_DIR) + "/hf/" + name;
    std::ifstream in(dir + "/reference.json");
    ASSERT_TRUE(in);
    const auto ref = nlohmann::json::parse(in);
    auto model = Model::load(dir);
    const ModelConfig& c = model->config();
    CudaBackendOptions options = test::small_options();
    options.f32_weights = WeightPrecision::f32;
    CudaBackend gpu(options);
    // A causal model's prompt in chunks of 8; an encoder's (BERT: erf GELU,
    // bidirectional prefill attention) whole, in one step.
    const auto chunk = static_cast<int32_t>(c.causal ? 8 : c.n_ctx_train);
    ModelStage stage(
        model, gpu,
        {.max_tokens = chunk, .max_seqs = 8, .n_kv_blocks = 16, .kv_block_size = 16, .embedding_output = true});
    const auto ids = ref["token_ids"].get<std::vector<std::vector<int32_t>>>();
    for (size_t t = 0; t < ids.size(); ++t) {
      const auto n = static_cast<int32_t>(ids[t].size());
      std::vector<int32_t> table(static_cast<size_t>((n + 15) / 16));
      std::iota(table.begin(), table.end(), 0);
      EmbeddingPooler pooler(c.embedding.pooling, c.embedding.normalize, 0, n);
      for (int32_t past = 0; past < n; past += chunk) {
        const int32_t k = std::min(chunk, n - past);
        const bool all = c.embedding.pooling != Pooling::last;
        const BatchSeq seq{.n_tokens = k, .n_past = past, .block_table = table,
                           .n_logits = all ? k : (past + k == n ? 1 : 0)};
        const std::span<const int32_t> tokens(ids[t].data() + past, static_cast<size_t>(k));
        std::vector<float> rows(static_cast<size_t>(seq.n_logits * c.n_embd));
        stage.forward({.tokens = tokens, .seqs = std::span<const BatchSeq>(&seq, 1)}, nullptr, rows.data());
        for (int32_t j = 0; j < seq.n_logits; ++j) {
          pooler.add(std::span<const float>(rows.data() + j * c.n_embd, static_cast<size_t>(c.n_embd)),
                     past + k - seq.n_logits + j);
        }
      }
      const std::vector<float> got = pooler.result();
      const auto want = ref["embeddings"][t].get<std::vector<float>>();
      ASSERT_EQ(got.size(), want.size());
      float worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
      EXPECT_LT(worst, 1e-4f) << "text " << t;
    }
  }
}

// A fixture directory's model and reference.json, and a GPU stage over its
// f32 weights whose last stage returns rows (an encoder's, or its head's
// scores): the classifier tests' setup.
struct FixtureOnGpu {
  static CudaBackendOptions f32_options() {
    CudaBackendOptions o = test::small_options();
    o.f32_weights = WeightPrecision::f32;
    return o;
  }
  static nlohmann::json read_reference(const std::string& dir) {
    std::ifstream in(dir + "/reference.json");
    EXPECT_TRUE(in) << dir;
    return nlohmann::json::parse(in);
  }
  explicit FixtureOnGpu(const std::string& name)
      : dir(std::string(TROUPE_FIXTURES_DIR) + "/hf/" + name),
        ref(read_reference(dir)),
        model(Model::load(dir)),
        gpu(f32_options()),
        stage(model, gpu,
              {.max_tokens = 128, .max_seqs = 8, .n_kv_blocks = 16, .kv_block_size = 16, .embedding_output = true}) {}

  std::string dir;
  nlohmann::json ref;
  std::shared_ptr<const Model> model;
  CudaBackend gpu;
  ModelStage stage;
};

// One whole prompt of one sequence: its rows ([n_rows, output width]).
std::vector<float> run_prompt(ModelStage& stage, const std::vector<int32_t>& ids, int32_t n_rows,
                              int32_t type1_from = -1) {
  const auto n = static_cast<int32_t>(ids.size());
  std::vector<int32_t> table(static_cast<size_t>((n + 15) / 16));
  std::iota(table.begin(), table.end(), 0);
  const BatchSeq seq{.n_tokens = n, .n_past = 0, .block_table = table, .n_logits = n_rows, .type1_from = type1_from};
  std::vector<float> rows(static_cast<size_t>(n_rows * stage.output_width()));
  stage.forward({.tokens = ids, .seqs = std::span<const BatchSeq>(&seq, 1)}, nullptr, rows.data());
  return rows;
}

// Cross-encoders on the device: BERT's token types (type 1 from the
// document on, gathered from the type table), RoBERTa's offset positions,
// the classifier head (dense, tanh, projection) over the last stage's rows;
// the [CLS] row's logit against CrossEncoder's.
TEST(CudaModelStage, RerankersMatchCrossEncoder) {
  TROUPE_REQUIRE_GPU();
  for (const std::string name : {"bert_reranker", "roberta_reranker", "xlm_roberta_reranker"}) {
    SCOPED_TRACE(name);
    FixtureOnGpu f(name);
    ASSERT_EQ(f.model->config().n_labels, 1);
    ASSERT_EQ(f.stage.output_width(), 1);
    const auto ids = f.ref["token_ids"].get<std::vector<std::vector<int32_t>>>();
    const auto types = f.ref["token_type_ids"].get<std::vector<std::vector<int32_t>>>();
    for (size_t t = 0; t < ids.size(); ++t) {
      const auto first_type1 = std::find(types[t].begin(), types[t].end(), 1);
      const int32_t type1_from =
          first_type1 == types[t].end() ? -1 : static_cast<int32_t>(first_type1 - types[t].begin());
      const auto n = static_cast<int32_t>(ids[t].size());
      EXPECT_NEAR(run_prompt(f.stage, ids[t], n, type1_from)[0], f.ref["logits"][t].get<float>(), 1e-4f)
          << "pair " << t;
    }
  }
}

// Classifiers of single texts on the device: BERT's head (dense, tanh),
// NomicBERT's rotary encoder under it, DistilBERT's ReLU head; every label's
// logit of the [CLS] row against transformers'.
TEST(CudaModelStage, ClassifiersMatchTransformers) {
  TROUPE_REQUIRE_GPU();
  for (const std::string name : {"bert_classifier", "nomic_bert_classifier", "distilbert_classifier"}) {
    SCOPED_TRACE(name);
    FixtureOnGpu f(name);
    const int32_t n_labels = f.model->config().n_labels;
    ASSERT_EQ(f.stage.output_width(), n_labels);
    const auto ids = f.ref["token_ids"].get<std::vector<std::vector<int32_t>>>();
    for (size_t t = 0; t < ids.size(); ++t) {
      // The [CLS] row's logits come first.
      const std::vector<float> rows = run_prompt(f.stage, ids[t], static_cast<int32_t>(ids[t].size()));
      for (int32_t l = 0; l < n_labels; ++l) {
        EXPECT_NEAR(rows[static_cast<size_t>(l)], f.ref["logits"][t][l].get<float>(), 1e-4f) << "text " << t;
      }
    }
  }
}

// ModernBERT's local windows reach both ways, which the CUDA attention does
// not: the stage is refused when it is made, naming why.
TEST(CudaModelStage, ModernBertIsRefusedWithItsReason) {
  TROUPE_REQUIRE_GPU();
  auto model = Model::load(std::string(TROUPE_FIXTURES_DIR) + "/hf/modernbert_reranker");
  CudaBackend gpu(test::small_options());
  try {
    ModelStage stage(model, gpu, {.max_tokens = 64, .max_seqs = 4, .n_kv_blocks = 16, .embedding_output = true});
    ADD_FAILURE() << "a ModernBERT stage was made on the GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("local attention"), std::string::npos) << e.what();
  }
}

// Causal rerankers and classifiers: the head over the last token (no
// bias, one "yes" - "no" row or `score`), after the GPU's prefill.
TEST(CudaModelStage, CausalRerankersMatchTransformers) {
  TROUPE_REQUIRE_GPU();
  for (const std::string name : {"qwen3_reranker", "qwen3_reranker_seq_cls"}) {
    SCOPED_TRACE(name);
    FixtureOnGpu f(name);
    ASSERT_EQ(f.model->config().n_labels, 1);
    const auto ids = f.ref["token_ids"].get<std::vector<std::vector<int32_t>>>();
    for (size_t t = 0; t < ids.size(); ++t) {
      EXPECT_NEAR(run_prompt(f.stage, ids[t], 1)[0], f.ref["logits"][t].get<float>(), 1e-4f) << "pair " << t;
    }
  }
}

}  // namespace
}  // namespace troupe
