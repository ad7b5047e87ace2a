// Byte-level BPE over a GGUF "gpt2" vocab (GPT-2, Llama 3, Qwen2, SmolLM2):
// the pre-tokenizer cuts text into pieces, each piece's bytes start as
// single-character tokens, and adjacent pairs merge by merge rank.
#pragma once

#include <array>

#include "tokenizer/bpe_merges.hpp"
#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(VocabData vocab);

 private:
  void encode_text(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const override;
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  PreTokenizer pre_;
  std::array<int32_t, 256> byte_ids_{};  // token for each byte's stand-in, -1 if absent
  BpeMerges merges_;
};

}  // namespace troupe
