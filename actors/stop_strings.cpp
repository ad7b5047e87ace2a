// StopStringMatcher: earliest full match wins; otherwise emit everything
// before the earliest suffix that is a prefix of a stop string.
#include "actors/stop_strings.hpp"

#include <algorithm>

namespace troupe {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops) {
  for (std::string& s : stops) {
    if (s.empty()) continue;
    max_len_ = std::max(max_len_, s.size());
    stops_.push_back(std::move(s));
  }
}

StopStringMatcher::Result StopStringMatcher::push(std::string_view piece) {
  Result r;
  if (stopped_) return r;
  pending_.append(piece);
  if (stops_.empty()) {
    r.text = std::move(pending_);
    pending_.clear();
    return r;
  }
  // A match can only start inside pending_: everything emitted before was
  // checked not to begin any stop string.
  size_t best = std::string::npos;
  const std::string* which = nullptr;
  for (const std::string& s : stops_) {
    const size_t pos = pending_.find(s);
    if (pos < best) {
      best = pos;
      which = &s;
    }
  }
  if (which != nullptr) {
    stopped_ = true;
    r.stopped = true;
    r.stop = *which;
    r.text = pending_.substr(0, best);
    pending_.clear();
    return r;
  }
  // Hold back from the first position whose suffix could still grow into a
  // stop string. Stop strings are valid UTF-8, so that position is a
  // character boundary and the emitted text stays valid UTF-8.
  const size_t n = pending_.size();
  size_t hold = n;
  for (size_t p = n > max_len_ ? n - max_len_ + 1 : 0; p < n; ++p) {
    const std::string_view suffix = std::string_view(pending_).substr(p);
    const bool could_start = std::any_of(stops_.begin(), stops_.end(), [&](const std::string& s) {
      return s.size() > suffix.size() && std::string_view(s).substr(0, suffix.size()) == suffix;
    });
    if (could_start) {
      hold = p;
      break;
    }
  }
  r.text = pending_.substr(0, hold);
  pending_.erase(0, hold);
  return r;
}

std::string StopStringMatcher::flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace troupe
