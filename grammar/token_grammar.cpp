// Token-level grammar checks: one token by its bytes, or every token by a
// preorder walk of the vocabulary trie that prunes refused subtrees.
#include "grammar/token_grammar.hpp"

#include <limits>

#include "core/error.hpp"

namespace troupe::grammar {

size_t MaskCache::KeyHash::operator()(const std::vector<int32_t>& k) const {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the 32-bit words
  for (int32_t v : k) {
    h ^= static_cast<uint32_t>(v);
    h *= 1099511628211ull;
  }
  return static_cast<size_t>(h);
}

std::shared_ptr<const MaskCache::Bits> MaskCache::find(const std::vector<int32_t>& key) const {
  const auto it = masks_.find(key);
  return it == masks_.end() ? nullptr : it->second;
}

void MaskCache::put(const std::vector<int32_t>& key, std::shared_ptr<const Bits> bits) {
  if (masks_.size() >= kMaxMasks) masks_.clear();
  masks_.emplace(key, std::move(bits));
}

TokenGrammar::TokenGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                           std::shared_ptr<MaskCache> cache)
    : matcher_(std::move(grammar)), trie_(std::move(trie)), cache_(cache ? std::move(cache) : std::make_shared<MaskCache>()) {
  if (!trie_) throw Error(Errc::invalid_argument, "token grammar: no vocabulary trie");
  path_.resize(static_cast<size_t>(trie_->max_depth()) + 1);
}

bool TokenGrammar::allows(int32_t token) {
  if (trie_->is_end(token)) return matcher_.can_end();
  if (!trie_->is_text(token)) return false;
  // Greedy decoding calls this every token: the two state vectors are
  // members, so a steady decode allocates nothing here.
  const size_t mark = matcher_.mark();
  check_cur_ = matcher_.stacks();
  bool ok = true;
  for (char c : trie_->bytes(token)) {
    matcher_.advance(check_cur_, static_cast<uint8_t>(c), check_next_);
    if (check_next_.empty()) {
      ok = false;
      break;
    }
    check_cur_.swap(check_next_);
  }
  matcher_.release(mark);
  return ok;
}

int32_t TokenGrammar::intern(const Matcher::Stacks& stacks) {
  std::vector<int32_t> key;
  matcher_.key(stacks, key);
  if (auto it = walk_ids_.find(key); it != walk_ids_.end()) return it->second;
  const auto id = static_cast<int32_t>(walk_states_.size());
  WalkState& w = walk_states_.emplace_back();
  w.stacks = stacks;
  w.next = matcher_.next_bytes(stacks);
  w.to.fill(kUnknown);
  walk_ids_.emplace(std::move(key), id);
  return id;
}

void TokenGrammar::walk(Bits& allowed) {
  ++stats_.walks;
  const size_t mark = matcher_.mark();
  walk_states_.clear();
  walk_ids_.clear();
  path_[0] = intern(matcher_.stacks());
  const size_t n = trie_->n_nodes();
  for (size_t i = 1; i < n;) {
    ++stats_.nodes;
    const auto d = static_cast<size_t>(trie_->depth(i));
    const uint8_t b = trie_->byte(i);
    const int32_t from = path_[d - 1];
    int32_t to = walk_states_[static_cast<size_t>(from)].to[b];
    if (to == kUnknown) {
      if (!walk_states_[static_cast<size_t>(from)].next.has(b)) {
        to = kDead;
      } else {
        matcher_.advance(walk_states_[static_cast<size_t>(from)].stacks, b, scratch_);
        to = scratch_.empty() ? kDead : intern(scratch_);
      }
      walk_states_[static_cast<size_t>(from)].to[b] = to;  // after intern(): it may grow the vector
    }
    if (to == kDead) {
      i = trie_->subtree_end(i);
      continue;
    }
    for (const int32_t* t = trie_->tokens_begin(i); t != trie_->tokens_end(i); ++t) {
      allowed[static_cast<size_t>(*t) >> 6] |= uint64_t{1} << (*t & 63);
    }
    path_[d] = to;
    ++i;
  }
  walk_states_.clear();
  walk_ids_.clear();
  matcher_.release(mark);
  if (matcher_.can_end()) {
    for (int32_t t : trie_->end_tokens()) allowed[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  }
}

void TokenGrammar::mask(std::span<float> logits) {
  if (logits.size() != static_cast<size_t>(trie_->n_vocab())) {
    throw Error(Errc::internal, "token grammar: logits of " + std::to_string(logits.size()) +
                                    " entries for a vocabulary of " + std::to_string(trie_->n_vocab()));
  }
  matcher_.key(matcher_.stacks(), key_);
  std::shared_ptr<const Bits> bits = cache_->find(key_);
  if (bits) {
    ++stats_.cache_hits;
  } else {
    auto fresh = std::make_shared<Bits>((logits.size() + 63) / 64, 0);
    walk(*fresh);
    cache_->put(key_, fresh);
    bits = std::move(fresh);
  }
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t w = 0; w < bits->size(); ++w) {
    const uint64_t word = (*bits)[w];
    if (word == ~uint64_t{0}) continue;
    const size_t end = std::min(logits.size(), (w + 1) * 64);
    if (word == 0) {  // most words in a state that allows few tokens
      std::fill(logits.begin() + static_cast<ptrdiff_t>(w * 64), logits.begin() + static_cast<ptrdiff_t>(end), kNegInf);
      continue;
    }
    for (size_t t = w * 64; t < end; ++t) {
      if (!((word >> (t & 63)) & 1u)) logits[t] = kNegInf;
    }
  }
}

void TokenGrammar::accept(int32_t token) {
  if (trie_->is_end(token)) {
    if (!matcher_.can_end()) throw Error(Errc::internal, "token grammar: an end token before the output is complete");
    return;
  }
  if (!trie_->is_text(token) || !matcher_.accept(trie_->bytes(token))) {
    throw Error(Errc::internal, "token grammar: token " + std::to_string(token) + " does not continue the output");
  }
}

void TokenGrammar::accept_bytes(std::string_view bytes) {
  if (!matcher_.accept(bytes)) throw Error(Errc::internal, "token grammar: bytes that do not continue the output");
}

}  // namespace troupe::grammar
