// Holds back an unfinished UTF-8 character at the end of streamed text so
// that no SSE chunk or WebSocket frame ever ends inside a character. The
// pipeline's token texts are already whole characters; this is the edge's
// own guarantee, whatever the text source does.
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/utf8.hpp"

namespace troupe::net {

class Utf8Joiner {
 public:
  // The text that is now complete: valid UTF-8 (bytes that can never
  // become valid turn into U+FFFD at once).
  std::string push(std::string_view bytes) {
    held_.append(bytes);
    std::string out;
    const size_t used = utf8::append_lossy(out, held_, /*at_end=*/false);
    held_.erase(0, used);
    return out;
  }

  // Everything still held plus `tail`, an unfinished character becoming
  // U+FFFD; the joiner is then empty.
  std::string finish(std::string_view tail = {}) {
    held_.append(tail);
    std::string out;
    utf8::append_lossy(out, held_, /*at_end=*/true);
    held_.clear();
    return out;
  }

  size_t held_bytes() const { return held_.size(); }

 private:
  std::string held_;
};

}  // namespace troupe::net
