// A thinking budget (Anthropic's thinking.budget_tokens): once the output
// has spent `budget` tokens inside a <think> block that is still open, the
// block is closed for the model: the next tokens are forced to a closing
// text (`closer`, e.g. the tokens of "\n</think>\n\n"), and the model
// answers after it. A character split across tokens is finished first, so
// the thinking text stays UTF-8. Tokens are counted inside <think>...
// </think> only; the block is found in the bytes (tags split across tokens
// count) or by the tags' ids where they are special tokens. Another
// constraint (the output format's) may be wrapped: it sees every token,
// and a closer it refuses is not forced (the model goes on).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grammar/token_constraint.hpp"
#include "grammar/token_trie.hpp"

namespace troupe::grammar {

// The tags' ids where they are special tokens, whose bytes the trie does
// not hold; -1: the tags are text.
struct ThinkTags {
  int32_t open = -1;
  int32_t close = -1;
};

class ThinkingBudget : public TokenConstraint {
 public:
  // prompt: its last kPromptTail tokens say whether the output begins
  // inside a <think> block (a template that opens it for the model).
  // inner: may be null.
  ThinkingBudget(int32_t budget, std::vector<int32_t> closer, std::shared_ptr<const TokenTrie> trie, ThinkTags tags,
                 std::span<const int32_t> prompt, std::unique_ptr<TokenConstraint> inner);

  static constexpr size_t kPromptTail = 32;

  bool allows(int32_t token) override;
  void mask(std::span<float> logits) override;
  void accept(int32_t token) override;
  bool done() const override { return inner_ != nullptr && inner_->done(); }

  // Tokens spent inside <think> blocks so far (forced ones included).
  int32_t thinking_tokens() const { return spent_; }

 private:
  // The token to force now, or -1.
  int32_t forced();
  // Follows the tags and the last character's UTF-8 through one token.
  void read(int32_t token);

  int32_t budget_;
  std::vector<int32_t> closer_;
  std::shared_ptr<const TokenTrie> trie_;
  ThinkTags tags_;
  std::unique_ptr<TokenConstraint> inner_;
  bool thinking_ = false;
  int32_t spent_ = 0;
  size_t closed_ = 0;      // closer tokens forced so far
  bool forcing_ = false;   // the budget is spent: the closer is being written
  bool given_up_ = false;  // the inner constraint refused the closer
  int utf8_owed_ = 0;      // continuation bytes the output's last character still needs
  std::string tail_;       // the output's last bytes, where a tag may begin
};

}  // namespace troupe::grammar
