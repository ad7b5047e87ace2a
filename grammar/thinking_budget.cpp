#include "grammar/thinking_budget.hpp"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <utility>

#include "core/error.hpp"

namespace troupe::grammar {
namespace {

constexpr std::string_view kOpenTag = "<think>";
constexpr std::string_view kCloseTag = "</think>";

}  // namespace

ThinkingBudget::ThinkingBudget(int32_t budget, std::vector<int32_t> closer, std::shared_ptr<const TokenTrie> trie,
                               ThinkTags tags, std::span<const int32_t> prompt, std::unique_ptr<TokenConstraint> inner)
    : budget_(budget), closer_(std::move(closer)), trie_(std::move(trie)), tags_(tags), inner_(std::move(inner)) {
  if (budget_ < 0 || closer_.empty() || !trie_) {
    throw Error(Errc::invalid_argument, "thinking budget: a budget >= 0, a closing text and a vocabulary are needed");
  }
  for (int32_t t : closer_) {
    if (t < 0 || t >= trie_->n_vocab()) {
      throw Error(Errc::invalid_argument, "thinking budget: closer token outside vocab");
    }
  }
  for (int32_t t : prompt.last(std::min(prompt.size(), kPromptTail))) read(t);
  forcing_ = thinking_ && budget_ == 0;
}

int32_t ThinkingBudget::forced() {
  if (!forcing_ || given_up_ || closed_ >= closer_.size()) return -1;
  if (closed_ == 0 && utf8_owed_ > 0) return -1;  // the model ends its character first
  const int32_t t = closer_[closed_];
  if (inner_ != nullptr && !inner_->allows(t)) {
    given_up_ = true;
    return -1;
  }
  return t;
}

bool ThinkingBudget::allows(int32_t token) {
  if (const int32_t f = forced(); f >= 0) return token == f;
  return inner_ == nullptr || inner_->allows(token);
}

void ThinkingBudget::mask(std::span<float> logits) {
  if (const int32_t f = forced(); f >= 0) {
    const float keep = logits[static_cast<size_t>(f)];
    for (float& l : logits) l = -INFINITY;
    // A forced token is chosen whatever its logit, -inf included.
    logits[static_cast<size_t>(f)] = std::isfinite(keep) ? keep : 0.0f;
    return;
  }
  if (inner_ != nullptr) inner_->mask(logits);
}

void ThinkingBudget::read(int32_t token) {
  // The tags are found in the bytes: a window long enough to hold one
  // across the token boundary.
  if (token == tags_.open || token == tags_.close) {
    thinking_ = token == tags_.open;
    tail_.clear();
  } else if (token >= 0 && token < trie_->n_vocab()) {
    const std::string& bytes = trie_->bytes(token);
    tail_ += bytes;
    for (const char ch : bytes) {
      const auto b = static_cast<unsigned char>(ch);
      if (utf8_owed_ > 0 && (b & 0xC0) == 0x80) {
        --utf8_owed_;
      } else {
        utf8_owed_ = b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : b >= 0xC0 ? 1 : 0;
      }
    }
  }
  for (size_t at = 0;;) {
    const size_t open = tail_.find(kOpenTag, at);
    const size_t close = tail_.find(kCloseTag, at);
    if (open == std::string::npos && close == std::string::npos) break;
    if (close == std::string::npos || (open != std::string::npos && open < close)) {
      thinking_ = true;
      at = open + kOpenTag.size();
    } else {
      thinking_ = false;
      at = close + kCloseTag.size();
    }
    tail_.erase(0, at);
    at = 0;
  }
  if (tail_.size() >= kCloseTag.size()) tail_.erase(0, tail_.size() - (kCloseTag.size() - 1));
}

void ThinkingBudget::accept(int32_t token) {
  if (inner_ != nullptr) inner_->accept(token);
  if (thinking_) ++spent_;
  if (forcing_ && closed_ < closer_.size() && token == closer_[closed_]) ++closed_;
  read(token);
  // A block the model closed itself while its last character was being
  // finished needs no closer.
  if (!thinking_ && forcing_ && closed_ == 0) forcing_ = false;
  // The closer is written to its end (the blank line after the tag too),
  // unless the model closed the block itself before the budget ran out.
  if (forcing_ && closed_ >= closer_.size()) {
    forcing_ = false;
    thinking_ = false;  // whatever bytes the tag's token has
  }
  if (thinking_ && !forcing_ && !given_up_ && spent_ >= budget_) {
    forcing_ = true;
    closed_ = 0;
  }
}

}  // namespace troupe::grammar
