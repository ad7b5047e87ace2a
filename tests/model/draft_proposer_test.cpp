// DraftProposer on stories260K: a model drafting for itself proposes its
// own greedy continuation; the draft KV kept between calls is rolled back
// to the prefix a new query shares, with the same proposals as a fresh
// proposer; sequences batched propose what they propose alone; the first
// layers with the output head (self-speculation) likewise; pages run out
// cleanly and come back on forget.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/draft_proposer.hpp"
#include "model/generator.hpp"

namespace troupe {
namespace {

std::shared_ptr<const Model> stories() {
  static const std::shared_ptr<const Model> m =
      Model::load(std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf");
  return m;
}

std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int32_t n) {
  CpuBackend backend({.n_threads = 1});
  Generator gen(stories(), backend);
  GenerateRequest req{.max_new_tokens = n};
  req.sampling.temperature = 0.0f;
  req.stop_tokens = {-1};
  return gen.generate(prompt, req);
}

std::vector<int32_t> propose_one(DraftProposer& d, int64_t id, const std::vector<int32_t>& tokens, int32_t k) {
  const ProposalQuery q{.id = id, .tokens = tokens, .k = k};
  std::vector<std::vector<int32_t>> out;
  d.propose(std::span(&q, 1), out);
  return out.at(0);
}

const std::vector<int32_t> kPromptA = {1, 403, 407, 261, 378, 260, 365, 411, 263, 372};
const std::vector<int32_t> kPromptB = {1, 306, 271, 275, 263, 414, 268, 260};

TEST(DraftProposer, TheModelDraftingForItselfProposesItsGreedyContinuation) {
  CpuBackend backend({.n_threads = 1});
  DraftProposer d(stories(), backend, {.n_kv_blocks = 64});
  EXPECT_STREQ(d.name(), "draft");
  EXPECT_EQ(propose_one(d, 1, kPromptA, 6), greedy(kPromptA, 6));
  // Its KV holds the prompt and every proposal but the last.
  EXPECT_EQ(d.n_cached(1), static_cast<int32_t>(kPromptA.size()) + 5);
}

TEST(DraftProposer, KvRollsBackToTheSharedPrefix) {
  CpuBackend backend({.n_threads = 1});
  DraftProposer d(stories(), backend, {.n_kv_blocks = 64});
  const std::vector<int32_t> first = propose_one(d, 7, kPromptA, 4);
  // The target accepted two proposals, then chose another token.
  std::vector<int32_t> next = kPromptA;
  next.insert(next.end(), first.begin(), first.begin() + 2);
  next.push_back(first[2] == 300 ? 301 : 300);
  const std::vector<int32_t> again = propose_one(d, 7, next, 5);
  EXPECT_EQ(again, greedy(next, 5));
  DraftProposer fresh(stories(), backend, {.n_kv_blocks = 64});
  EXPECT_EQ(again, propose_one(fresh, 7, next, 5));
  // Everything accepted, nothing new: still proposes (re-running the last token).
  std::vector<int32_t> all = next;
  all.insert(all.end(), again.begin(), again.end());
  EXPECT_EQ(propose_one(d, 7, all, 3), greedy(all, 3));
}

TEST(DraftProposer, BatchedSequencesProposeWhatTheyProposeAlone) {
  for (const int64_t layers : {-1, 3}) {
    SCOPED_TRACE("layers " + std::to_string(layers));
    CpuBackend backend({.n_threads = 2});
    DraftProposer alone(stories(), backend, {.n_layers = layers, .n_kv_blocks = 64});
    DraftProposer batched(stories(), backend, {.n_layers = layers, .n_kv_blocks = 64, .max_tokens = 8});
    if (layers > 0) {
      EXPECT_STREQ(batched.name(), "self");
    }
    const std::vector<ProposalQuery> qs = {{.id = 1, .tokens = kPromptA, .k = 4},
                                           {.id = 2, .tokens = kPromptB, .k = 2},
                                           {.id = 3, .tokens = kPromptA, .k = 0}};
    std::vector<std::vector<int32_t>> out;
    batched.propose(qs, out);  // max_tokens 8: the prompts are read in chunks
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0], propose_one(alone, 1, kPromptA, 4));
    EXPECT_EQ(out[1], propose_one(alone, 2, kPromptB, 2));
    EXPECT_TRUE(out[2].empty());
    EXPECT_EQ(out[0].size(), 4u);
    EXPECT_EQ(out[1].size(), 2u);
  }
}

TEST(DraftProposer, PagesRunOutCleanlyAndComeBack) {
  CpuBackend backend({.n_threads = 1});
  // 2 pages of 16: one sequence of 10 + 4 fits, a second one does not.
  DraftProposer d(stories(), backend, {.n_kv_blocks = 2});
  const std::vector<ProposalQuery> qs = {{.id = 1, .tokens = kPromptA, .k = 4},
                                         {.id = 2, .tokens = kPromptA, .k = 30}};
  std::vector<std::vector<int32_t>> out;
  d.propose(qs, out);
  EXPECT_EQ(out[0].size(), 4u);
  EXPECT_TRUE(out[1].empty());
  // An idle sequence gives its pages to a new one.
  EXPECT_EQ(propose_one(d, 3, kPromptB, 3).size(), 3u);
  d.forget(1);
  d.forget(3);
  d.forget(2);
  EXPECT_EQ(d.n_free_blocks(), 2);
  EXPECT_THROW(DraftProposer(stories(), backend, {.n_layers = 0}), Error);
  EXPECT_THROW(DraftProposer(stories(), backend, {.n_layers = 6}), Error);
}

}  // namespace
}  // namespace troupe
