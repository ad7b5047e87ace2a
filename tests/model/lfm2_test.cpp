// What LFM2's short-convolution layers change around the forward pass (whose
// logits hf_models_test and gguf_archs_test hold to transformers): the
// cache bytes a conv layer takes, what the planner allows on CUDA, and the
// configs and files that mark them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "model/stage_plan.hpp"

namespace troupe {
namespace {

std::shared_ptr<const Model> lfm2_hf() { return Model::load(std::string(TROUPE_FIXTURES_DIR) + "/hf/lfm2"); }

TEST(Lfm2, ConfigAndFileMarkTheSameConvLayers) {
  const auto hf = lfm2_hf();
  const auto gguf = Model::load(std::string(TROUPE_FIXTURES_DIR) + "/gguf/lfm2.gguf");
  for (const auto& m : {hf, gguf}) {
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.arch, "lfm2");
    EXPECT_EQ(c.conv_layers, (std::vector<uint8_t>{1, 1, 0, 1}));
    EXPECT_EQ(c.conv_kernel, 3);
    EXPECT_EQ(c.n_head_kv, 2);  // the attention layer's, not the conv layers' 0
    EXPECT_EQ(c.n_ff, 64);      // 2/3 of 96, as Lfm2MLP and the converter derive it
    EXPECT_EQ(c.rope_theta, 1e6f);
    EXPECT_TRUE(c.tied_output);
  }
}

// A conv layer caches one row of n_embd per token and no V: 3 conv layers
// of 64 and one attention layer of 2 kv heads of 16, K and V.
TEST(Lfm2, ConvLayersCacheOneRowAToken) {
  const auto model = lfm2_hf();
  const ModelConfig& c = model->config();
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8_0}) {
    SCOPED_TRACE(kv_type_name(t));
    const int64_t want = 3 * kv_row_bytes(t, 64) + 2 * 2 * kv_row_bytes(t, 16);
    EXPECT_EQ(stage_kv_token_bytes(c, 0, c.n_layer, t), want);
    EXPECT_EQ(stage_kv_token_bytes(c, 2, 3, t), 2 * 2 * kv_row_bytes(t, 16));  // the attention layer alone
    const StageOptions o{.max_tokens = 16, .max_seqs = 2, .n_kv_blocks = 5, .kv_block_size = 8, .kv_type = t};
    CpuBackend cpu({.n_threads = 1});
    ModelStage stage(model, cpu, o);
    EXPECT_EQ(stage.kv_bytes(), static_cast<size_t>(5 * 8 * want));
    EXPECT_EQ(ModelStage::footprint(*model, o, false).kv_bytes, static_cast<size_t>(5 * 8 * want));
    EXPECT_EQ(kv_blocks_for_budget(c, t, 8, 10 * 8 * want + 1), 10);
    stage.copy_kv_block(1, 3);  // every layer's pages, the conv ones without V
  }
}

// Conv layers plan on CUDA as on the CPU (both backends have the kernel);
// what CUDA cannot do is a q8_0 row whose n_embd is not a multiple of 32,
// refused when the stages are planned, before any device is opened.
TEST(Lfm2, PlannerTakesConvLayersOnCudaUnlessTheirRowsCannotBeQ8) {
  const auto model = lfm2_hf();
  const StageOptions o{.max_tokens = 16, .max_seqs = 2, .n_kv_blocks = 5, .kv_block_size = 8};
  const std::vector<StagePlacement> split = {{.first_layer = 0, .last_layer = 2, .device = "cpu"},
                                             {.first_layer = 2, .last_layer = -1, .device = "cuda:0"}};
  EXPECT_EQ(plan_stages(*model, split, o).size(), 2u);
  ModelConfig odd = model->config();
  odd.n_embd = 80;
  EXPECT_EQ(stage_layers_refusal("cuda", odd, 0, 2, KvType::q8_0),
            "the cuda backend cannot hold a q8_0 KV cache for the short-convolution rows of layer 0 (n_embd 80 is "
            "not a multiple of 32; use --kv-type f16 or bf16)");
  EXPECT_EQ(stage_layers_refusal("cuda", odd, 2, 3, KvType::q8_0), "");  // the attention layer alone
  EXPECT_EQ(stage_layers_refusal("cuda", odd, 0, 4, KvType::f16), "");
  EXPECT_EQ(stage_layers_refusal("cpu", odd, 0, 4, KvType::q8_0), "");
}

// The last logits of a prompt's tail run over cached history: `tokens`
// are positions [n_past, n_past + tokens.size()) of the sequence whose KV
// blocks are `table`.
std::vector<float> tail_logits(ModelStage& stage, const std::vector<int32_t>& tokens, int32_t n_past,
                               const std::vector<int32_t>& table, int64_t n_vocab) {
  const BatchSeq seq{.n_tokens = static_cast<int32_t>(tokens.size()), .n_past = n_past, .block_table = table,
                     .n_logits = 1};
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  stage.forward({.tokens = tokens, .seqs = std::span(&seq, 1)}, nullptr, logits.data());
  return logits;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

// What the scheduler does with KV pages, on a model whose conv layers keep
// their history there: a prompt whose first block another sequence filled
// (prefix sharing), and a prompt whose rows past n_past hold rejected
// speculative tokens (rollback), give the logits of the prompt run whole.
TEST(Lfm2, SharedPrefixBlocksAndRolledBackRowsGiveTheWholePromptsLogits) {
  const auto model = lfm2_hf();
  const int64_t n_vocab = model->config().n_vocab;
  CpuBackend cpu({.n_threads = 2});
  ModelStage stage(model, cpu, {.max_tokens = 16, .max_seqs = 1, .n_kv_blocks = 12, .kv_block_size = 4});
  const std::vector<int32_t> prompt = {1, 17, 93, 5, 211, 48, 7, 160, 33, 250, 12};
  const std::vector<float> whole = tail_logits(stage, prompt, 0, {0, 1, 2}, n_vocab);

  // Block 0 (positions 0-3) as the first run wrote it; the rest fresh.
  const std::vector<int32_t> tail(prompt.begin() + 4, prompt.end());
  EXPECT_LT(max_diff(tail_logits(stage, tail, 4, {0, 5, 6}, n_vocab), whole), 1e-5f);

  // Positions 8-10 first hold three other tokens (proposals a verifier
  // rejected), then the prompt's own from n_past 8.
  const std::vector<int32_t> head(prompt.begin(), prompt.begin() + 8);
  tail_logits(stage, head, 0, {7, 8, 9}, n_vocab);
  tail_logits(stage, {2, 3, 4}, 8, {7, 8, 9}, n_vocab);
  const std::vector<int32_t> rest(prompt.begin() + 8, prompt.end());
  EXPECT_LT(max_diff(tail_logits(stage, rest, 8, {7, 8, 9}, n_vocab), whole), 1e-5f);
  // The history is read from the pages: the same tail over another block 0 differs.
  tail_logits(stage, {3, 3, 3, 3}, 0, {10}, n_vocab);
  EXPECT_GT(max_diff(tail_logits(stage, tail, 4, {10, 5, 6}, n_vocab), whole), 1e-3f);
}

}  // namespace
}  // namespace troupe
