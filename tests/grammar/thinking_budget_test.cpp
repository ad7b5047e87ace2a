// The thinking budget: tokens are counted inside <think> blocks only (tags
// split across tokens, or special tag tokens), the closer is forced token by
// token once the budget is spent, and the model goes free after it.
#include "grammar/thinking_budget.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/lazy_token_grammar.hpp"

namespace troupe::grammar {
namespace {

// Ids: 0 "<s>" (control), then the pieces below, then "<think>" and
// "</think>" as control tokens (as a vocabulary whose tags are special).
// The last three bytes spell 日 (E6 97 A5) as byte-fallback tokens do.
const std::vector<std::string> kPieces = {"a",    " b", "<th",     "ink>", "</",   "think>", "\n",
                                          "\n\n", "x",  "<think>", "\xE6", "\x97", "\xA5"};
constexpr int32_t kA = 1, kB = 2, kThOpen1 = 3, kThOpen2 = 4, kClose1 = 5, kClose2 = 6, kNl = 7, kNl2 = 8, kX = 9,
                  kOpenText = 10, kLead = 11, kCont1 = 12, kCont2 = 13, kOpenSpecial = 14, kCloseSpecial = 15;

std::shared_ptr<const TokenTrie> tag_trie() {
  std::vector<std::string> bytes = {"<s>"};
  std::vector<bool> text = {false};
  for (const std::string& p : kPieces) {
    bytes.push_back(p);
    text.push_back(true);
  }
  for (const char* tag : {"<think>", "</think>"}) {
    bytes.emplace_back(tag);
    text.push_back(false);
  }
  return std::make_shared<const TokenTrie>(bytes, text, std::vector<int32_t>{});
}

// The closer "\n</think>\n\n" in this vocabulary's text pieces.
const std::vector<int32_t> kCloser = {kNl, kClose1, kClose2, kNl2};
// Prompts that leave the output inside a block (a template's "<think>"), or not.
const std::vector<int32_t> kThinkingPrompt = {kA, kOpenText};
const std::vector<int32_t> kPlainPrompt = {kA};

// The one token mask() leaves, or -1 when it leaves more than one.
int32_t only_token(TokenConstraint& c, size_t n_vocab) {
  std::vector<float> logits(n_vocab, 1.0f);
  c.mask(logits);
  int32_t kept = -1;
  for (size_t t = 0; t < n_vocab; ++t) {
    if (std::isinf(logits[t])) continue;
    if (kept >= 0) return -1;
    kept = static_cast<int32_t>(t);
  }
  return kept;
}

TEST(ThinkingBudget, ClosesAnOpenBlockOnceTheBudgetIsSpent) {
  const auto tr = tag_trie();
  const size_t n = static_cast<size_t>(tr->n_vocab());
  ThinkingBudget b(3, kCloser, tr, {}, kThinkingPrompt, nullptr);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(only_token(b, n), -1) << i;  // free while the budget lasts
    EXPECT_TRUE(b.allows(kX));
    b.accept(kA);
  }
  EXPECT_EQ(b.thinking_tokens(), 3);
  for (int32_t t : kCloser) {
    EXPECT_EQ(only_token(b, n), t);
    EXPECT_TRUE(b.allows(t));
    EXPECT_FALSE(b.allows(kA));
    b.accept(t);
  }
  // The block is closed: the answer is free and no longer counted.
  EXPECT_EQ(only_token(b, n), -1);
  const int32_t spent = b.thinking_tokens();
  for (int i = 0; i < 10; ++i) b.accept(kB);
  EXPECT_EQ(b.thinking_tokens(), spent);
  EXPECT_EQ(only_token(b, n), -1);
  EXPECT_FALSE(b.done());
}

TEST(ThinkingBudget, CountsOnlyInsideBlocksFoundInTheBytes) {
  const auto tr = tag_trie();
  const size_t n = static_cast<size_t>(tr->n_vocab());
  ThinkingBudget b(2, kCloser, tr, {}, kPlainPrompt, nullptr);
  for (int i = 0; i < 5; ++i) b.accept(kA);  // outside a block: free
  EXPECT_EQ(b.thinking_tokens(), 0);
  b.accept(kThOpen1);  // "<th" + "ink>": a tag across two tokens
  b.accept(kThOpen2);
  EXPECT_EQ(only_token(b, n), -1);
  b.accept(kA);
  b.accept(kB);
  EXPECT_EQ(only_token(b, n), kNl);  // two tokens inside: spent
  // A model that closes its block itself before the budget is spent goes free.
  ThinkingBudget early(4, kCloser, tr, {}, kPlainPrompt, nullptr);
  for (int32_t t : {kOpenText, kA, kClose1, kClose2, kA, kA, kA, kA}) {
    EXPECT_EQ(only_token(early, n), -1);
    early.accept(t);
  }
  EXPECT_EQ(early.thinking_tokens(), 3);  // a, "</", "think>"
}

TEST(ThinkingBudget, FollowsSpecialTagTokensAndAZeroBudget) {
  const auto tr = tag_trie();
  const size_t n = static_cast<size_t>(tr->n_vocab());
  const ThinkTags tags{.open = kOpenSpecial, .close = kCloseSpecial};
  const std::vector<int32_t> closer = {kNl, kCloseSpecial, kNl2};
  ThinkingBudget b(1, closer, tr, tags, kPlainPrompt, nullptr);
  b.accept(kOpenSpecial);  // no bytes in the trie: known by its id
  EXPECT_EQ(only_token(b, n), -1);
  b.accept(kA);
  for (int32_t t : closer) {
    ASSERT_EQ(only_token(b, n), t);
    b.accept(t);
  }
  EXPECT_EQ(only_token(b, n), -1);
  // 0 with the prompt's block open: the closer comes first.
  ThinkingBudget zero(0, closer, tr, tags, std::vector<int32_t>{kOpenSpecial}, nullptr);
  EXPECT_EQ(only_token(zero, n), kNl);
  // The closer is forced even where its logit is -inf.
  std::vector<float> logits(n, 1.0f);
  logits[kNl] = -INFINITY;
  zero.mask(logits);
  EXPECT_TRUE(std::isfinite(logits[kNl]));
  EXPECT_THROW(ThinkingBudget(-1, closer, tr, tags, kPlainPrompt, nullptr), Error);
  EXPECT_THROW(ThinkingBudget(1, {}, tr, tags, kPlainPrompt, nullptr), Error);
}

TEST(ThinkingBudget, FinishesACharacterSplitAcrossTokensFirst) {
  const auto tr = tag_trie();
  const size_t n = static_cast<size_t>(tr->n_vocab());
  ThinkingBudget b(2, kCloser, tr, {}, kThinkingPrompt, nullptr);
  b.accept(kA);
  b.accept(kLead);  // the budget is spent inside a three-byte character
  EXPECT_EQ(only_token(b, n), -1);
  b.accept(kCont1);
  EXPECT_EQ(only_token(b, n), -1);
  b.accept(kCont2);
  EXPECT_EQ(only_token(b, n), kNl);  // whole: the closer now
  // A model that closes the block itself meanwhile gets no closer after it.
  ThinkingBudget closes(1, kCloser, tr, {}, kThinkingPrompt, nullptr);
  closes.accept(kLead);
  closes.accept(kClose1);
  closes.accept(kClose2);
  EXPECT_EQ(only_token(closes, n), -1);
  closes.accept(kA);
  EXPECT_EQ(only_token(closes, n), -1);
}

TEST(ThinkingBudget, AnInnerConstraintSeesEveryTokenAndMayRefuseTheCloser) {
  const auto tr = tag_trie();
  const size_t n = static_cast<size_t>(tr->n_vocab());
  // A lazy grammar waiting for "x" (outside a block) lets the closer through,
  // and the budget's forced tokens reach it.
  auto lazy = std::make_unique<LazyTokenGrammar>("x", json_object_grammar(), tr, nullptr, /*think_open=*/true);
  ThinkingBudget b(1, kCloser, tr, {}, kThinkingPrompt, std::move(lazy));
  b.accept(kA);
  for (int32_t t : kCloser) {
    ASSERT_EQ(only_token(b, n), t);
    b.accept(t);
  }
  // After the block, "x" triggers the inner grammar: "a" may not follow.
  b.accept(kX);
  EXPECT_FALSE(b.allows(kA));
  // An inner constraint that refuses the closer's first token: nothing is
  // forced, and the model goes on under the inner constraint.
  struct NoNewline : TokenConstraint {
    bool allows(int32_t t) override { return t != kNl; }
    void mask(std::span<float> l) override { l[kNl] = -INFINITY; }
    void accept(int32_t) override {}
    bool done() const override { return false; }
  };
  ThinkingBudget refused(0, kCloser, tr, {}, kThinkingPrompt, std::make_unique<NoNewline>());
  EXPECT_EQ(only_token(refused, n), -1);
  EXPECT_FALSE(refused.allows(kNl));
  EXPECT_TRUE(refused.allows(kA));
}

}  // namespace
}  // namespace troupe::grammar
