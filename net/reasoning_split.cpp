// A small state machine over the held bytes: undecided (does the output
// open with <think>?), reasoning (until </think>), the spaces that start
// the answer, the answer.
#include "net/reasoning_split.hpp"

#include <algorithm>

namespace troupe::net {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

void erase_leading_spaces(std::string& s) { s.erase(0, std::find_if_not(s.begin(), s.end(), is_space) - s.begin()); }

// The length of the longest tail of `s` that `tag` starts with.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(tag.size() - 1, s.size()); k > 0; --k) {
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  }
  return 0;
}

}  // namespace

ReasoningStream::ReasoningStream(bool starts_open) : state_(starts_open ? State::reasoning : State::undecided) {}

ReasoningParts ReasoningStream::push(std::string_view piece) {
  held_.append(piece);
  return step(false);
}

ReasoningParts ReasoningStream::finish() { return step(true); }

ReasoningParts ReasoningStream::step(bool last) {
  ReasoningParts out;
  while (true) {
    switch (state_) {
      case State::undecided: {
        const std::string_view s(held_);
        const size_t first = std::find_if_not(s.begin(), s.end(), is_space) - s.begin();
        const std::string_view rest = s.substr(first);
        if (rest.starts_with(kOpen)) {
          held_.erase(0, first + kOpen.size());
          state_ = State::reasoning;
          continue;
        }
        if (!last && kOpen.starts_with(rest)) return out;  // spaces, or the tag's first bytes: wait
        state_ = State::answer;
        continue;
      }
      case State::reasoning: {
        if (!reasoning_began_) {
          // Blank lines before the reasoning are not part of it.
          erase_leading_spaces(held_);
          // An open tag that the template already wrote may come again:
          // drop it, once, so that a stream cut anywhere drops what a whole
          // output drops.
          if (!repeat_checked_) {
            if (held_.starts_with(kOpen)) {
              held_.erase(0, kOpen.size());
              erase_leading_spaces(held_);
            } else if (held_.empty() || (!last && kOpen.starts_with(held_))) {
              return out;  // spaces, or the tag's first bytes: wait
            }
            repeat_checked_ = true;
          }
          if (held_.empty()) return out;
        }
        const size_t close = held_.find(kClose);
        size_t give = close != std::string::npos ? close : held_.size() - (last ? 0 : partial_tag(held_, kClose));
        // Spaces that may be the last before </think> wait for what follows.
        size_t keep = give;
        while (keep > 0 && is_space(held_[keep - 1])) --keep;
        if (close == std::string::npos && !last) give = keep;
        out.reasoning.append(held_, 0, keep);
        if (keep > 0) reasoning_began_ = true;
        if (close == std::string::npos) {
          held_.erase(0, last ? held_.size() : give);
          return out;
        }
        held_.erase(0, close + kClose.size());
        state_ = State::answer_start;
        continue;
      }
      case State::answer_start: {
        erase_leading_spaces(held_);
        if (held_.empty()) return out;
        state_ = State::answer;
        continue;
      }
      case State::answer:
        out.content += held_;
        held_.clear();
        return out;
    }
  }
}

ReasoningParts split_reasoning(std::string_view text, bool starts_open) {
  ReasoningStream stream(starts_open);
  ReasoningParts a = stream.push(text);
  ReasoningParts b = stream.finish();
  a.reasoning += b.reasoning;
  a.content += b.content;
  return a;
}

}  // namespace troupe::net
