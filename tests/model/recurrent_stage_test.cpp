// A stage of a model with recurrent layers (the Qwen3.5 fixture): its state
// slots are counted in its footprint, a batch naming a slot outside them or
// one slot twice is refused, a slot another sequence used is started afresh
// at position 0, and no cache type is refused for its page-less layers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/model_stage.hpp"
#include "tests/exact_math.hpp"
#include "tests/model/hf_reference_run.hpp"

namespace troupe {
namespace {

using namespace hf_test;  // NOLINT: the fixture helpers

std::shared_ptr<const Model> qwen35() { return Model::load(fixture_dir("qwen3_5")); }

TEST(RecurrentStage, StateSlotsAreInTheFootprint) {
  auto model = qwen35();
  const ModelConfig& c = model->config();
  ASSERT_TRUE(c.has_recurrent_layers());
  // Layers 0, 2 and 3 are Gated DeltaNet: 3 taps of history over q, k and
  // v (2 x 32 + 32 channels), and 2 value heads of [16, 16].
  EXPECT_EQ(c.recurrent_state_floats(), 3 * 96 + 2 * 16 * 16);
  EXPECT_EQ(stage_state_bytes(c, 0, c.n_layer), 3 * c.recurrent_state_floats() * 4);
  EXPECT_EQ(stage_state_bytes(c, 1, 2), 0);  // the attention layer alone
  // Only the attention layer has pages.
  EXPECT_EQ(stage_kv_token_bytes(c, 0, c.n_layer, KvType::f32), 2 * c.kv_dim() * 4);
  StageOptions o = stage_options(3);
  o.n_state_slots = 5;
  CpuBackend backend({.n_threads = 1});
  const ModelStage stage(model, backend, o);
  EXPECT_EQ(stage.state_slots(), 5);
  EXPECT_EQ(stage.kv_bytes(), ModelStage::footprint(*model, o, false).kv_bytes);
  EXPECT_EQ(stage.kv_bytes(), static_cast<size_t>(o.n_kv_blocks * o.kv_block_size * 2 * c.kv_dim() * 4 +
                                                  5 * stage_state_bytes(c, 0, c.n_layer)));
  // A stage of the attention layer alone keeps no state.
  o.first_layer = 1;
  o.last_layer = 2;
  EXPECT_EQ(ModelStage(model, backend, o).state_slots(), 0);
}

TEST(RecurrentStage, BadSlotsAreRefused) {
  auto model = qwen35();
  CpuBackend backend({.n_threads = 1});
  ModelStage stage(model, backend, stage_options(2));  // 2 slots
  const std::vector<int32_t> table{0, 1, 2};
  const std::vector<int32_t> table2{3, 4, 5};
  const std::vector<int32_t> tokens{5, 6, 7, 8};
  std::vector<float> logits(static_cast<size_t>(2 * model->config().n_vocab));
  auto run = [&](int32_t slot_a, int32_t slot_b) {
    const BatchSeq seqs[] = {{.n_tokens = 2, .n_past = 0, .block_table = table, .n_logits = 1, .state_slot = slot_a},
                             {.n_tokens = 2, .n_past = 0, .block_table = table2, .n_logits = 1, .state_slot = slot_b}};
    stage.forward({.tokens = tokens, .seqs = seqs}, nullptr, logits.data());
  };
  EXPECT_NO_THROW(run(0, 1));
  for (const auto& [a, b] : {std::pair{0, 2}, std::pair{-1, 1}, std::pair{1, 1}}) {
    try {
      run(a, b);
      ADD_FAILURE() << "slots " << a << ", " << b << " were accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("recurrent-state slot"), std::string::npos) << e.what();
    }
  }
}

// Slot 0 runs one prompt and then, from position 0, another: the second's
// logits are transformers', as if the slot were new.
TEST(RecurrentStage, ASlotIsStartedAfreshAtPositionZero) {
  const test::ExactMath exact;
  const auto ref = reference("qwen3_5");
  auto model = qwen35();
  CpuBackend backend({.n_threads = 2});
  ModelStage stage(model, backend, stage_options(1));
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  const std::vector<int32_t> table{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<float> logits(static_cast<size_t>(model->config().n_vocab));
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE("prompt " + std::to_string(i));
    const BatchSeq seq{.n_tokens = static_cast<int32_t>(prompts[i].size()),
                       .n_past = 0,
                       .block_table = table,
                       .n_logits = 1,
                       .state_slot = 0};
    stage.forward({.tokens = prompts[i], .seqs = std::span(&seq, 1)}, nullptr, logits.data());
    EXPECT_LT(max_abs_diff(logits.data(), ref["last_logits"][i].get<std::vector<float>>()), kTolerance);
  }
}

// Their layers keep no pages, so no cache type is refused for them on
// either backend (the CUDA kernels: kernels/cuda/gated_delta.cu).
TEST(RecurrentStage, NoCacheTypeIsRefusedForTheirLayers) {
  const auto model = qwen35();
  const ModelConfig& c = model->config();
  for (const char* backend : {"cpu", "cuda"}) {
    for (const KvType t : {KvType::f32, KvType::f16, KvType::bf16, KvType::q8_0}) {
      EXPECT_EQ(stage_layers_refusal(backend, c, 0, c.n_layer, t), "") << backend << " " << kv_type_name(t);
    }
  }
}

// Granite 4.0-H's Mamba-2 layers keep the conv history and [32, 16] per
// head; no cache type is refused for them on either backend.
TEST(RecurrentStage, Mamba2StateAndBackends) {
  const auto model = Model::load(fixture_dir("granite_hybrid"));
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.recurrent_state_floats(), 3 * (128 + 2 * 16) + 4 * 32 * 16);
  EXPECT_EQ(stage_state_bytes(c, 0, c.n_layer), 3 * c.recurrent_state_floats() * 4);  // layers 0, 1 and 3
  for (const char* backend : {"cpu", "cuda"}) {
    EXPECT_EQ(stage_layers_refusal(backend, c, 0, c.n_layer, KvType::q8_0), "") << backend;
  }
}

}  // namespace
}  // namespace troupe
