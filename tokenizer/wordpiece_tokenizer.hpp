// The tokenizer a Hugging Face tokenizer.json with a WordPiece model describes
// (BERT and its embedding descendants: bge, e5, gte, MiniLM): normalizer ->
// pre-tokenizer -> greedy longest-match-first WordPiece per word, and the
// WordPiece decoder ("##" pieces glue to the one before, others get a space).
// Added tokens, [CLS]/[SEP] and streaming come from the Tokenizer base class.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/hf_normalizer.hpp"
#include "tokenizer/hf_pre_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

// tokenizer.json's "model" (type WordPiece).
struct WordPieceModel {
  std::vector<bool> in_model;             // [n_vocab] the id is in model.vocab (not only an added token)
  int32_t unk_id = -1;                    // model.unk_token: what a word that cannot be split becomes
  std::string continuing_subword_prefix;  // "##": marks a piece that continues a word
  size_t max_input_chars_per_word = 100;  // a longer word is one unk
};

// tokenizer.json's "decoder" (type WordPiece).
struct WordPieceDecoder {
  std::string prefix = "##";  // stripped from continuing pieces; other pieces but the first get a space
  bool cleanup = true;        // Hugging Face's cleanup of " ." " ," " 's" ... on each piece
};

struct WordPiecePipeline {
  hf::Normalizer normalizer;
  hf::PreTokenizer pre_tokenizer;
  WordPieceModel model;
  WordPieceDecoder decoder;
};

class WordPieceTokenizer final : public Tokenizer {
 public:
  // vocab.tokens holds model and added tokens; token_types marks added tokens
  // (control: special, user_defined: not). Throws Error(bad_format) when the
  // unk token is missing.
  WordPieceTokenizer(VocabData vocab, WordPiecePipeline pipeline);

 private:
  void encode_text(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const override;
  // One pre-tokenized word through the WordPiece model.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  int32_t model_id(std::string_view text) const;

  WordPiecePipeline pipeline_;
  std::unordered_map<std::string_view, int32_t> model_ids_;  // views into vocab_.tokens
};

// A GGUF "bert" vocabulary (llama.cpp's converter): pieces in llama.cpp's
// "phantom space" spelling, a word's first piece prefixed with U+2581 and
// the "##" of the others dropped, spelled back as tokenizer.json spells
// them; BERT's normalizer (lower-casing and stripping accents as
// vocab.lowercase says, as bert-base-uncased's does) and pre-tokenizer;
// [CLS] and [SEP] around the text as add_bos / add_eos say.
std::unique_ptr<Tokenizer> wordpiece_from_gguf(VocabData vocab);

// The WordPiece decoder's cleanup on one piece's text (with its leading
// space): " ." -> ".", " n't" -> "n't", " do not" -> " don't", ... in Hugging
// Face's order.
std::string wordpiece_cleanup(std::string_view text);

}  // namespace troupe
