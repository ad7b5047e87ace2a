// Streams generated tokens out as text: each push returns only whole UTF-8
// characters, holding back a multi-byte character split across tokens (an
// emoji spelled as four <0xNN> byte tokens) until it is complete. The pushes
// and the final flush concatenate to exactly Tokenizer::decode of all ids.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.hpp"

namespace troupe {

struct IncrementalDecoderOptions {
  bool skip_special = true;  // as Tokenizer::decode's skip_special
};

class IncrementalDecoder {
 public:
  // tokenizer must outlive the decoder.
  explicit IncrementalDecoder(const Tokenizer& tokenizer, IncrementalDecoderOptions options = {});

  // The text newly completed by id: valid UTF-8, possibly empty. Bytes that
  // can never become valid are replaced by U+FFFD right away.
  std::string push(int32_t id);

  // Whatever is still held back, an unfinished character becoming U+FFFD;
  // the decoder then starts over as if new.
  std::string flush();

  // Bytes held back waiting for the rest of a character (or, with Hugging
  // Face's ByteFallback decoder, for the end of a run of byte tokens).
  size_t pending_bytes() const { return pending_.size() + stream_.held_bytes(); }

 private:
  Tokenizer::ByteStream stream_;
  std::string pending_;
};

}  // namespace troupe
