// The vocabulary a tokenizer is built from: the contents of GGUF's
// tokenizer.ggml.* keys as plain data, so the tokenizer needs no file format
// (model/gguf_vocab.hpp fills it from a GGUF file).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

// tokenizer.ggml.token_type values (llama.cpp's numbering).
enum class TokenType : int32_t {
  normal = 1,
  unknown = 2,
  control = 3,        // <s>, <|im_start|>: matched in text only when asked
  user_defined = 4,   // always matched whole in text
  unused = 5,
  byte = 6,           // SPM byte fallback pieces "<0x0A>"
};

struct VocabData {
  std::string model;                // "llama" (SentencePiece BPE), "gpt2" (byte-level BPE), "bert" (WordPiece) or
                                    // "t5" (SentencePiece Unigram);
                                    // "hf-bpe" / "hf-wordpiece" for tokenizer.json (hf_tokenizer.hpp builds those)
  std::string pre;                  // pre-tokenizer name for gpt2: "default", "llama-bpe", "qwen2", "smollm", ...
  std::vector<std::string> tokens;  // [n_vocab] token texts as GGUF spells them ("▁the", "Ġthe")
  std::vector<float> scores;        // [n_vocab] SPM merge priorities; may be empty for gpt2
  std::vector<int32_t> token_types; // [n_vocab] TokenType values; empty means all normal
  std::vector<std::string> merges;  // gpt2: "left right", best (lowest rank) first
  int32_t bos_id = -1;              // -1 when absent
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  int32_t eot_id = -1;              // end-of-turn token, when the file names one
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;    // SPM: prepend "▁" to the text (and strip it on decode)
  bool lowercase = false;           // bert (WordPiece): lower-case the text, and strip its accents
  // tokenizer.json's added tokens that take the whitespace beside them into
  // their match ([n_vocab] or empty): kLstrip the whitespace before
  // (XLM-R's <mask>), kRstrip the whitespace after.
  static constexpr uint8_t kLstrip = 1, kRstrip = 2;
  std::vector<uint8_t> added_strip;
  // t5 (SentencePiece Unigram: XLM-RoBERTa's GGUF): the normalization
  // charsmap (SentencePiece's Precompiled), and whether runs of spaces
  // become one.
  std::string precompiled_charsmap;
  bool remove_extra_whitespaces = false;
  // How two texts join into one input (a cross-encoder's query and
  // document), as the post-processor's pair template says: BOS (with
  // add_bos), A, pair_between, B, pair_after. Token type 1 (BERT's second
  // segment) begins at pair_between[pair_type1_from], or at B when it is
  // pair_between.size(), and runs to the end; -1: every token is type 0
  // (RoBERTa). has_pair false: the vocabulary defines no pair template.
  bool has_pair = false;
  std::vector<int32_t> pair_between;  // [SEP]; RoBERTa: </s> </s>
  std::vector<int32_t> pair_after;    // [SEP]; RoBERTa: </s>
  int32_t pair_type1_from = -1;
};

}  // namespace troupe
