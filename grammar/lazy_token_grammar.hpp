// A grammar that applies only from where the output writes a trigger (the
// "<tool_call>" that opens a call): before it the model writes freely; once
// the trigger is out, every token must continue what the grammar allows
// after it. This is how tool_choice "auto" gets well-formed calls without
// forcing one (llama.cpp calls these lazy grammars).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/token_constraint.hpp"
#include "grammar/token_grammar.hpp"

namespace troupe::grammar {

class LazyTokenGrammar final : public TokenConstraint {
 public:
  // after: what may follow the trigger. A trigger
  // inside a <think> block is the model thinking aloud, not a call: it is
  // passed over; think_open: the output begins inside such a block (the
  // chat template opened it).
  LazyTokenGrammar(std::string trigger, std::shared_ptr<const Grammar> after, std::shared_ptr<const TokenTrie> trie,
                   std::shared_ptr<MaskCache> cache = nullptr, bool think_open = false);

  // Before the trigger every token is allowed, except one that completes
  // the trigger and goes on with bytes the grammar refuses.
  bool allows(int32_t token) override;
  void mask(std::span<float> logits) override;
  void accept(int32_t token) override;
  bool done() const override { return inner_ != nullptr && inner_->done(); }
  // The trigger was written: the grammar applies.
  bool active() const { return inner_ != nullptr; }

 private:
  // Where a trigger outside a <think> block ends inside `bytes`, were they
  // the next bytes of the output; npos: none does.
  size_t trigger_end(std::string_view bytes) const;

  std::string trigger_;
  std::shared_ptr<const Grammar> after_;
  std::shared_ptr<const TokenTrie> trie_;
  std::shared_ptr<MaskCache> cache_;
  // The tokens that can complete the trigger, found once per vocabulary
  // and trigger (a pass over the vocabulary costs milliseconds).
  struct Completers {
    std::vector<int32_t> closers;  // tokens whose bytes hold the trigger's last byte
    std::vector<int32_t> holders;  // tokens whose bytes hold the whole trigger
  };
  static std::shared_ptr<const Completers> completers(const std::shared_ptr<const TokenTrie>& trie,
                                                      const std::string& trigger);
  std::shared_ptr<const Completers> completers_;
  std::string text_;  // the output so far (while the grammar waits)
  bool think_open_ = false;
  std::unique_ptr<TokenGrammar> inner_;
};

}  // namespace troupe::grammar
