// The trigger is looked for in the output's bytes (the bytes of the tokens
// accepted, so a trigger split across tokens is found); the grammar starts
// on the bytes that follow it in the same token.
#include "grammar/lazy_token_grammar.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <utility>

#include "core/error.hpp"

namespace troupe::grammar {

LazyTokenGrammar::LazyTokenGrammar(std::string trigger, std::shared_ptr<const Grammar> after,
                                   std::shared_ptr<const TokenTrie> trie, std::shared_ptr<MaskCache> cache,
                                   bool think_open)
    : trigger_(std::move(trigger)),
      after_(std::move(after)),
      trie_(std::move(trie)),
      cache_(cache ? std::move(cache) : std::make_shared<MaskCache>()),
      think_open_(think_open) {
  if (trigger_.empty() || !trie_) throw Error(Errc::invalid_argument, "lazy grammar: no trigger or no vocabulary trie");
  completers_ = completers(trie_, trigger_);
}

std::shared_ptr<const LazyTokenGrammar::Completers> LazyTokenGrammar::completers(
    const std::shared_ptr<const TokenTrie>& trie, const std::string& trigger) {
  // Few vocabularies and triggers per process; the entries keep their trie
  // alive, so a key's address is never reused while it is cached.
  static std::mutex mu;
  static std::map<std::pair<const TokenTrie*, std::string>,
                  std::pair<std::shared_ptr<const TokenTrie>, std::shared_ptr<const Completers>>>
      cache;
  const auto key = std::make_pair(trie.get(), trigger);
  std::lock_guard lock(mu);
  if (auto it = cache.find(key); it != cache.end()) return it->second.second;
  auto c = std::make_shared<Completers>();
  for (int32_t t = 0; t < trie->n_vocab(); ++t) {
    if (!trie->is_text(t)) continue;
    const std::string& b = trie->bytes(t);
    if (b.find(trigger.back()) != std::string::npos) c->closers.push_back(t);
    if (b.find(trigger) != std::string::npos) c->holders.push_back(t);
  }
  if (cache.size() >= 8) cache.clear();
  cache.emplace(key, std::make_pair(trie, c));
  return c;
}

size_t LazyTokenGrammar::trigger_end(std::string_view bytes) const {
  // Only a trigger that ends in the new bytes is new: look in the last
  // bytes of the output and the new ones (the whole output is read only
  // when a trigger is there, to see whether a <think> block holds it).
  // Greedy checks a token a step: most hold no byte that ends a trigger.
  if (bytes.find(trigger_.back()) == std::string_view::npos) return std::string::npos;
  const size_t from = text_.size() >= trigger_.size() ? text_.size() - (trigger_.size() - 1) : 0;
  std::string window = text_.substr(from);
  window.append(bytes);
  for (size_t w = window.find(trigger_); w != std::string::npos; w = window.find(trigger_, w + 1)) {
    std::string before = text_;
    before.append(bytes);
    before.resize(from + w);
    const size_t open = before.rfind("<think>");
    const size_t close = before.rfind("</think>");
    const bool thinking = close == std::string::npos ? (open != std::string::npos || think_open_)
                                                     : (open != std::string::npos && open > close);
    if (!thinking) return from + w + trigger_.size() - text_.size();
  }
  return std::string::npos;
}

bool LazyTokenGrammar::allows(int32_t token) {
  if (inner_) return inner_->allows(token);
  if (!trie_->is_text(token)) return true;
  const std::string& bytes = trie_->bytes(token);
  const size_t end = trigger_end(bytes);
  if (end == std::string::npos) return true;
  Matcher m(after_);
  return m.accept(std::string_view(bytes).substr(end));
}

void LazyTokenGrammar::mask(std::span<float> logits) {
  if (inner_) {
    inner_->mask(logits);
    return;
  }
  // Unless the output ends in the trigger's first bytes, only a token that
  // holds the whole trigger can complete it: a sampled step checks a
  // handful of tokens, not every token with a '>'.
  bool partial = false;
  for (size_t k = std::min(trigger_.size() - 1, text_.size()); k > 0 && !partial; --k) {
    partial = std::string_view(text_).substr(text_.size() - k) == std::string_view(trigger_).substr(0, k);
  }
  for (int32_t t : partial ? completers_->closers : completers_->holders) {
    if (!allows(t)) logits[static_cast<size_t>(t)] = -std::numeric_limits<float>::infinity();
  }
}

void LazyTokenGrammar::accept(int32_t token) {
  if (inner_) {
    inner_->accept(token);
    return;
  }
  if (!trie_->is_text(token)) return;  // control and end tokens write no text
  const std::string& bytes = trie_->bytes(token);
  const size_t end = trigger_end(bytes);
  if (end != std::string::npos) {
    inner_ = std::make_unique<TokenGrammar>(after_, trie_, cache_);
    inner_->accept_bytes(std::string_view(bytes).substr(end));
    return;
  }
  text_.append(bytes);
}

}  // namespace troupe::grammar
