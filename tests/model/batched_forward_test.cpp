// One forward step over a batch of sequences at different positions, with
// scattered KV blocks, equals running each sequence alone; and a model split
// into two stages equals one stage. Real weights: stories260K.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/generator.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"

namespace troupe {
namespace {

const std::string kModel = std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
constexpr int64_t kBatchBlock = 16;

float max_diff_n(const float* a, const float* b, int64_t n) {
  float worst = 0;
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

struct Seq {
  std::vector<int32_t> tokens;       // prompt, then generated
  std::vector<int32_t> block_table;  // scattered physical blocks
  int32_t n_past = 0;
};

TEST(BatchedForward, BatchEqualsEachSequenceAlone) {
  auto model = Model::load(kModel);
  const int64_t n_vocab = model->config().n_vocab;
  CpuBackend backend({.n_threads = 2});
  ModelStage stage(model, backend, {.max_tokens = 128, .max_seqs = 8, .n_kv_blocks = 64, .kv_block_size = kBatchBlock});

  // Four prompts of different lengths; their KV blocks are a shuffled
  // partition of the pool so no sequence owns contiguous pages.
  std::mt19937 rng(5);
  std::vector<int32_t> physical(64);
  std::iota(physical.begin(), physical.end(), 0);
  std::shuffle(physical.begin(), physical.end(), rng);
  const std::vector<int> lengths = {1, 17, 40, 5};
  std::vector<Seq> seqs;
  for (size_t s = 0; s < lengths.size(); ++s) {
    Seq q;
    q.tokens.push_back(1);
    for (int i = 1; i < lengths[s]; ++i) q.tokens.push_back(static_cast<int32_t>(3 + rng() % 500));
    q.block_table.assign(physical.begin() + static_cast<long>(s * 16), physical.begin() + static_cast<long>(s * 16 + 16));
    seqs.push_back(q);
  }

  Generator alone(model, backend, {.n_ctx = 256});
  std::vector<float> logits(seqs.size() * static_cast<size_t>(n_vocab));
  for (int step = 0; step < 6; ++step) {
    // Step 0 prefills every prompt; later steps decode one token each.
    std::vector<int32_t> tokens;
    std::vector<BatchSeq> batch;
    for (Seq& q : seqs) {
      const auto n_new = static_cast<int32_t>(q.tokens.size()) - q.n_past;
      tokens.insert(tokens.end(), q.tokens.begin() + q.n_past, q.tokens.end());
      batch.push_back({.n_tokens = n_new, .n_past = q.n_past, .block_table = q.block_table, .n_logits = 1});
    }
    stage.forward({.tokens = tokens, .seqs = batch}, nullptr, logits.data());
    for (size_t s = 0; s < seqs.size(); ++s) {
      Seq& q = seqs[s];
      const std::vector<float> want = alone.prompt_logits(q.tokens);
      const float* got = logits.data() + s * static_cast<size_t>(n_vocab);
      EXPECT_LT(max_diff_n(got, want.data(), n_vocab), 1e-4f) << "step " << step << " sequence " << s;
      q.n_past = static_cast<int32_t>(q.tokens.size());
      q.tokens.push_back(static_cast<int32_t>(std::max_element(got, got + n_vocab) - got));
    }
  }
}

TEST(BatchedForward, TwoStagesEqualOneStage) {
  auto model = Model::load(kModel);
  const ModelConfig& c = model->config();
  CpuBackend backend({.n_threads = 1});
  ModelStage whole(model, backend, {.max_tokens = 64, .max_seqs = 2, .n_kv_blocks = 8});
  ModelStage first(model, backend, {.first_layer = 0, .last_layer = 2, .max_tokens = 64, .max_seqs = 2, .n_kv_blocks = 8});
  ModelStage second(model, backend, {.first_layer = 2, .max_tokens = 64, .max_seqs = 2, .n_kv_blocks = 8});
  EXPECT_TRUE(first.is_first() && !first.is_last());
  EXPECT_TRUE(!second.is_first() && second.is_last());
  EXPECT_EQ(first.output_width(), c.n_embd);

  const std::vector<int32_t> tokens = {1, 403, 407, 261, 1, 317};
  const std::vector<int32_t> table_a = {0, 1}, table_b = {5, 3};
  const std::vector<BatchSeq> seqs = {{.n_tokens = 4, .n_past = 0, .block_table = table_a},
                                      {.n_tokens = 2, .n_past = 0, .block_table = table_b}};
  const BatchView batch{.tokens = tokens, .seqs = seqs};
  std::vector<float> want(2 * static_cast<size_t>(c.n_vocab)), got(want.size());
  std::vector<float> hidden(tokens.size() * static_cast<size_t>(c.n_embd));
  whole.forward(batch, nullptr, want.data());
  first.forward(batch, nullptr, hidden.data());
  second.forward(batch, hidden.data(), got.data());
  EXPECT_EQ(max_diff_n(got.data(), want.data(), static_cast<int64_t>(want.size())), 0.0f)
      << "a stage boundary only hands over hidden states: results are bit-identical";
}

TEST(BatchedForward, BadBatchesAreClearErrors) {
  auto model = Model::load(kModel);
  CpuBackend backend({.n_threads = 1});
  ModelStage stage(model, backend, {.max_tokens = 8, .max_seqs = 2, .n_kv_blocks = 4});
  std::vector<float> out(2 * static_cast<size_t>(model->config().n_vocab));
  const std::vector<int32_t> table = {0};
  const std::vector<int32_t> too_many(9, 5);
  const std::vector<BatchSeq> long_seq = {{.n_tokens = 9, .block_table = table}};
  EXPECT_THROW(stage.forward({.tokens = too_many, .seqs = long_seq}, nullptr, out.data()), Error);
  const std::vector<int32_t> bad_token = {100000};
  const std::vector<BatchSeq> one = {{.n_tokens = 1, .block_table = table}};
  EXPECT_THROW(stage.forward({.tokens = bad_token, .seqs = one}, nullptr, out.data()), Error);
  const std::vector<int32_t> bad_table = {7};
  const std::vector<BatchSeq> outside = {{.n_tokens = 1, .block_table = bad_table}};
  const std::vector<int32_t> ok_token = {1};
  EXPECT_THROW(stage.forward({.tokens = ok_token, .seqs = outside}, nullptr, out.data()), Error);
  EXPECT_THROW(ModelStage(model, backend, {.first_layer = 3, .last_layer = 3}), Error);
}

}  // namespace
}  // namespace troupe
