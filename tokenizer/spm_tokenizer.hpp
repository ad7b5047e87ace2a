// SentencePiece-style BPE over a GGUF "llama" vocab: spaces become "▁", pieces
// merge by score (highest first, leftmost on ties), and characters the vocab
// lacks fall back to <0xNN> byte tokens.
#pragma once

#include <array>

#include "tokenizer/tokenizer.hpp"

namespace troupe {

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(VocabData vocab);

 private:
  void encode_text(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const override;
  // A character outside the vocab: its bytes as byte tokens, or unk.
  void encode_unknown_char(std::string_view ch, std::vector<int32_t>& out, bool& last_was_unk) const;

  std::array<int32_t, 256> byte_ids_{};  // "<0xNN>" token per byte, -1 if absent
};

}  // namespace troupe
