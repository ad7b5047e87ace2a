// Incremental detokenisation (see incremental_decoder.hpp).
#include "tokenizer/incremental_decoder.hpp"

#include "tokenizer/utf8.hpp"

namespace troupe {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, IncrementalDecoderOptions options)
    : stream_(tokenizer, options.skip_special) {}

std::string IncrementalDecoder::push(int32_t id) {
  stream_.push(id, pending_);
  std::string out;
  const size_t used = utf8::append_lossy(out, pending_, false);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDecoder::flush() {
  stream_.finish(pending_);
  std::string out;
  utf8::append_lossy(out, pending_, true);
  pending_.clear();
  return out;
}

}  // namespace troupe
