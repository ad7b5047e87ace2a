// Incremental detokenisation (see incremental_decoder.hpp).
#include "tokenizer/incremental_decoder.hpp"

#include "tokenizer/utf8.hpp"

namespace troupe {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, IncrementalDecoderOptions options)
    : tokenizer_(tokenizer), options_(options) {}

std::string IncrementalDecoder::push(int32_t id) {
  std::string bytes = tokenizer_.token_to_bytes(id, !options_.skip_special);
  if (bytes.empty()) return {};
  if (at_start_) {
    // Decode strips one leading space of the whole text; the first byte of
    // the stream is where that space would be.
    if (tokenizer_.strips_leading_space() && bytes.front() == ' ') bytes.erase(0, 1);
    at_start_ = false;
  }
  pending_ += bytes;
  std::string out;
  const size_t used = utf8::append_lossy(out, pending_, false);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out;
  utf8::append_lossy(out, pending_, true);
  pending_.clear();
  at_start_ = true;
  return out;
}

}  // namespace troupe
