// Stop strings over streamed text: finds the first stop string in the text
// generated so far and holds back any tail that could still become one, so
// the stop text itself is never emitted. Plain C++ (the detokenizer actor
// owns one per request).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

class StopStringMatcher {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to emit now (before the stop string, if one matched)
    bool stopped = false;  // a stop string completed with this piece
    std::string stop;      // which one
  };

  // Appends a piece of output text. Once stopped, further pieces are ignored.
  Result push(std::string_view piece);

  // The held-back text, at the end of the stream.
  std::string flush();

  bool stopped() const { return stopped_; }
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::vector<std::string> stops_;
  size_t max_len_ = 0;
  std::string pending_;  // not emitted yet: a proper prefix of some stop string starts at 0
  bool stopped_ = false;
};

}  // namespace troupe
