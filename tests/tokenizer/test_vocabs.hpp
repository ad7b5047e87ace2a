// Small hand-made vocabularies for tokenizer unit tests that need no model
// file: an SPM ("llama") vocab with byte fallback and a byte-level BPE
// ("gpt2") vocab with a few merges.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/byte_level.hpp"
#include "tokenizer/utf8.hpp"
#include "tokenizer/vocab.hpp"

namespace troupe::testing_vocab {

inline void add(VocabData& v, std::string text, float score, TokenType type) {
  v.tokens.push_back(std::move(text));
  v.scores.push_back(score);
  v.token_types.push_back(static_cast<int32_t>(type));
}

// ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then pieces in the
// order given (scores as given), then the user-defined "<|user|>".
inline VocabData spm(const std::vector<std::pair<std::string, float>>& pieces, bool add_space_prefix = true) {
  VocabData v;
  v.model = "llama";
  add(v, "<unk>", 0, TokenType::unknown);
  add(v, "<s>", 0, TokenType::control);
  add(v, "</s>", 0, TokenType::control);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(v, name, 0, TokenType::byte);
  }
  for (const auto& [text, score] : pieces) add(v, text, score, TokenType::normal);
  add(v, "<|user|>", 0, TokenType::user_defined);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_bos = true;
  v.add_space_prefix = add_space_prefix;
  return v;
}

inline int32_t id_of(const VocabData& v, const std::string& text) {
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i] == text) return static_cast<int32_t>(i);
  }
  return -1;
}

inline std::string stand_in(int byte) {
  std::string s;
  utf8::append(s, byte_level::byte_to_char()[static_cast<size_t>(byte)]);
  return s;
}

// ids 0..255: the stand-in of each byte, in byte order; then the merged
// tokens; then <|endoftext|> (control) and <|im_end|> (control).
inline VocabData bpe(const std::vector<std::string>& merges, std::string pre = "gpt-2") {
  VocabData v;
  v.model = "gpt2";
  v.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(stand_in(b));
    v.token_types.push_back(static_cast<int32_t>(TokenType::normal));
  }
  for (const std::string& m : merges) {
    const size_t space = m.find(' ');
    v.tokens.push_back(m.substr(0, space) + m.substr(space + 1));
    v.token_types.push_back(static_cast<int32_t>(TokenType::normal));
    v.merges.push_back(m);
  }
  v.tokens.push_back("<|endoftext|>");
  v.token_types.push_back(static_cast<int32_t>(TokenType::control));
  v.tokens.push_back("<|im_end|>");
  v.token_types.push_back(static_cast<int32_t>(TokenType::control));
  v.eos_id = static_cast<int32_t>(v.tokens.size()) - 2;
  v.bos_id = v.eos_id;
  return v;
}

}  // namespace troupe::testing_vocab
