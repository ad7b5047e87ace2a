// The tokenizer a Hugging Face tokenizer.json describes, for the BPE model:
// normalizer -> pre-tokenizer -> BPE (merge ranks, byte fallback, unk) per
// piece, and the decoder's rules for turning tokens back into bytes. Added
// tokens, BOS/EOS and streaming come from the Tokenizer base class.
#pragma once

#include <array>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer/bpe_merges.hpp"
#include "tokenizer/hf_normalizer.hpp"
#include "tokenizer/hf_pre_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

// tokenizer.json's "model" (type BPE), with merges resolved to token ids.
struct HfBpeModel {
  std::vector<std::array<int32_t, 2>> merges;  // (left, right) ids, best first
  std::vector<bool> in_model;  // [n_vocab] the id is in model.vocab (not only an added token)
  int32_t unk_id = -1;         // model.unk_token, -1 for none (unknown characters are dropped)
  bool byte_fallback = false;  // characters outside the vocab become <0xNN> tokens
  bool fuse_unk = false;       // consecutive unknown characters make one unk
  bool ignore_merges = false;  // a piece that is a vocab token is taken whole
};

// tokenizer.json's "decoder", as rules on each token's text.
struct HfDecoder {
  struct Replace {
    std::string from;
    std::string to;
    bool drop_when_opening = false;  // Metaspace: in the text's first token "from" is removed instead
  };
  bool byte_level = false;          // tokens are spelled in GPT-2's byte alphabet
  std::vector<Replace> before;      // on every token's text, before ByteFallback
  bool byte_fallback = false;       // <0xNN> tokens are bytes, decoded in runs
  std::vector<Replace> after;       // after ByteFallback: on tokens and on decoded runs
  bool strip_leading_space = false; // Strip(" ", 1, 0) after Fuse
};

// Every token's bytes as the decoder renders it: in the middle of a text,
// and opening it (first_piece_bytes is empty when that never differs).
// Shared by the tokenizer.json models whose decoder is an HfDecoder.
struct HfDecodedPieces {
  std::vector<std::string> piece_bytes;        // [n_vocab]
  std::vector<std::string> first_piece_bytes;  // [n_vocab] or empty
};
// Fills vocab.token_types if empty; with ByteFallback, normal "<0xNN>"
// tokens become TokenType::byte, their bytes the byte itself.
HfDecodedPieces render_hf_decoder(const HfDecoder& decoder, VocabData& vocab);
// The decoder's rules after ByteFallback on one token's text or a run of
// byte tokens decoded together.
std::string hf_decoder_after(const HfDecoder& decoder, std::string text, bool opens_text);

struct HfPipeline {
  hf::Normalizer normalizer;
  hf::PreTokenizer pre_tokenizer;
  HfBpeModel model;
  HfDecoder decoder;
};

class HfBpeTokenizer final : public Tokenizer {
 public:
  // vocab.tokens holds model and added tokens; token_types marks added tokens
  // (control: special, user_defined: not). Throws Error(bad_format) for merges
  // naming ids outside the vocab.
  HfBpeTokenizer(VocabData vocab, HfPipeline pipeline);

 private:
  void encode_text(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const override;
  // One pre-tokenized piece through the BPE model.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  int32_t model_id(std::string_view text) const;
  std::string byte_run_text(std::string_view bytes, bool opens_text) const override;

  HfPipeline pipeline_;
  std::unordered_map<std::string_view, int32_t> model_ids_;  // views into vocab_.tokens
  std::array<int32_t, 256> byte_ids_{};                      // "<0xNN>" per byte, -1 if absent
  BpeMerges merges_;
};

}  // namespace troupe
