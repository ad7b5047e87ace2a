// A grammar applied to tokens: the sampler's TokenConstraint for one
// request. allows() walks one token's bytes; mask() walks the vocabulary
// trie from the current state. Masks are cached by the state's canonical
// key, so the long stretches where the state repeats (inside a string,
// between members) cost one walk.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.hpp"
#include "grammar/token_constraint.hpp"
#include "grammar/token_trie.hpp"

namespace troupe::grammar {

// Masks by parse state for one grammar over one vocabulary, shared by the
// requests that use that grammar (a server sees the same schema again and
// again): a state's walk is paid once, not once a request. Not
// thread-safe: one owner (a sampler actor) at a time.
class MaskCache {
 public:
  // Masks kept, each n_vocab bits (19 KB at 150k tokens); all are dropped
  // when full.
  static constexpr size_t kMaxMasks = 64;
  using Bits = std::vector<uint64_t>;
  struct KeyHash {
    size_t operator()(const std::vector<int32_t>& k) const;
  };
  std::shared_ptr<const Bits> find(const std::vector<int32_t>& key) const;
  void put(const std::vector<int32_t>& key, std::shared_ptr<const Bits> bits);

 private:
  std::unordered_map<std::vector<int32_t>, std::shared_ptr<const Bits>, KeyHash> masks_;
};

class TokenGrammar final : public TokenConstraint {
 public:
  // cache: shared with other requests of the same grammar and trie; null:
  // a cache of this request's own.
  TokenGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
               std::shared_ptr<MaskCache> cache = nullptr);

  bool allows(int32_t token) override;
  void mask(std::span<float> logits) override;

  // Moves the state past a chosen token. Throws Error(internal) when the
  // grammar does not allow it (the sampler only picks allowed tokens).
  void accept(int32_t token) override;
  // Moves the state past raw bytes (the part of a token after a lazy
  // grammar's trigger). Throws Error(internal) when the grammar refuses them.
  void accept_bytes(std::string_view bytes);
  // The output so far is complete and nothing may follow: the request ends.
  bool done() const override { return matcher_.done(); }
  bool can_end() const { return matcher_.can_end(); }

  struct Stats {
    uint64_t walks = 0;       // masks computed by a trie walk
    uint64_t cache_hits = 0;  // masks taken from the cache
    uint64_t nodes = 0;       // trie nodes visited by the walks
  };
  const Stats& stats() const { return stats_; }

 private:
  using Bits = MaskCache::Bits;
  using KeyHash = MaskCache::KeyHash;
  void walk(Bits& allowed);
  // A walk's states, interned by content: the trie's paths reach the same
  // few states over and over (inside a string every plain byte leads back
  // to the same state), so each (state, byte) step is computed once a walk
  // and then looked up.
  int32_t intern(const Matcher::Stacks& stacks);
  struct WalkState {
    Matcher::Stacks stacks;
    ByteSet next;                      // the bytes it takes
    std::array<int32_t, 256> to;       // by byte: the next state; kUnknown, kDead
  };
  static constexpr int32_t kUnknown = -2, kDead = -1;

  Matcher matcher_;
  std::shared_ptr<const TokenTrie> trie_;
  std::shared_ptr<MaskCache> cache_;
  std::vector<int32_t> key_;
  std::vector<WalkState> walk_states_;
  std::unordered_map<std::vector<int32_t>, int32_t, KeyHash> walk_ids_;
  std::vector<int32_t> path_;  // [trie depth] the state after each byte of the walk's path
  Matcher::Stacks scratch_;
  Matcher::Stacks check_cur_, check_next_;  // allows()'s walk
  Stats stats_;
};

}  // namespace troupe::grammar
