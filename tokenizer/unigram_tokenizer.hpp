// The tokenizer a Hugging Face tokenizer.json with a Unigram model describes
// (SentencePiece unigram models converted by transformers: XLM-RoBERTa and its
// embedding and reranker descendants — multilingual-e5, bge-m3 — and T5):
// normalizer -> pre-tokenizer -> the most probable segmentation of each word
// (Viterbi over the pieces' log probabilities), and the same decoders as BPE.
// Added tokens, BOS/EOS and streaming come from the Tokenizer base class.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/hf_bpe_tokenizer.hpp"
#include "tokenizer/hf_normalizer.hpp"
#include "tokenizer/hf_pre_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

// tokenizer.json's "model" (type Unigram). Its pieces are ids
// [0, scores.size()) of the vocab; ids past that are added tokens only.
struct UnigramModel {
  std::vector<double> scores;  // [n_pieces] each piece's log probability
  int32_t unk_id = -1;         // model.unk_id: what unknown characters become (required here)
  bool byte_fallback = false;  // unknown characters become their <0xNN> pieces when all exist
};

struct UnigramPipeline {
  hf::Normalizer normalizer;
  hf::PreTokenizer pre_tokenizer;
  UnigramModel model;
  HfDecoder decoder;
};

class UnigramTokenizer final : public Tokenizer {
 public:
  // vocab.tokens holds the pieces then any added tokens; token_types marks
  // added tokens (control: special, user_defined: not). Throws
  // Error(bad_format) when the pieces outnumber the tokens or unk_id is not
  // a piece.
  UnigramTokenizer(VocabData vocab, UnigramPipeline pipeline);
  ~UnigramTokenizer() override;

 private:
  class PieceTrie;

  void encode_text(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const override;
  // One pre-tokenized word through the Unigram model.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;
  int32_t piece_id(std::string_view text) const;
  std::string byte_run_text(std::string_view bytes, bool opens_text) const override;

  UnigramPipeline pipeline_;
  std::unique_ptr<const PieceTrie> trie_;                    // every piece, for prefix search
  std::unordered_map<std::string_view, int32_t> piece_ids_;  // views into vocab_.tokens; the last id on repeats
  std::array<int32_t, 256> byte_ids_{};                      // "<0xNN>" pieces, -1 if absent
  double unk_score_ = 0;                                     // the lowest score less 10, as Hugging Face
};

// A GGUF "t5" vocabulary (SentencePiece Unigram: llama.cpp's conversion of
// XLM-RoBERTa, bge-m3, multilingual-e5), as the tokenizer.json the
// checkpoint ships describes it: the Precompiled charsmap, runs of spaces
// made one (remove_extra_whitespaces), Metaspace (prepended when
// add_space_prefix), the pieces' scores, control and unknown tokens as
// special added tokens (<mask> taking the whitespace before it, as XLM-R's
// does), <s> A </s> when add_bos and add_eos (RoBERTa's pairs) or A </s>.
std::unique_ptr<Tokenizer> unigram_from_gguf(const VocabData& vocab);

}  // namespace troupe
