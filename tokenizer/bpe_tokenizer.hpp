// Byte-level BPE over a GGUF "gpt2" vocab (GPT-2, Llama 3, Qwen2, SmolLM2):
// the pre-tokenizer cuts text into pieces, each piece's bytes start as
// single-character tokens, and adjacent pairs merge by merge rank.
#pragma once

#include <array>
#include <unordered_map>

#include "tokenizer/pre_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(VocabData vocab);

 private:
  struct Merge {
    int32_t rank;  // lower merges first
    int32_t id;    // the merged token
  };

  void encode_text(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const override;
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  const Merge* find_merge(int32_t left, int32_t right) const;

  PreTokenizer pre_;
  std::array<int32_t, 256> byte_ids_{};             // token for each byte's stand-in, -1 if absent
  std::unordered_map<uint64_t, Merge> merges_;      // key: left id << 32 | right id
};

}  // namespace troupe
