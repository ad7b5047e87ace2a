// Text <-> token ids for the two GGUF tokenizer models: "llama" (SentencePiece
// BPE with byte fallback, spm_tokenizer.hpp) and "gpt2" (byte-level BPE,
// bpe_tokenizer.hpp). Both follow Hugging Face's conversion of the GGUF vocab.
// Hugging Face tokenizer.json files give an HfBpeTokenizer (hf_bpe_tokenizer.hpp)
// or a WordPieceTokenizer (wordpiece_tokenizer.hpp), loaded by hf_tokenizer.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace troupe {

class Tokenizer {
 public:
  // Builds the tokenizer the vocab names. Throws Error(unsupported) for an
  // unknown model or pre-tokenizer name and Error(bad_format) for data that
  // contradicts itself (sizes, ids out of range, merges naming missing tokens).
  static std::unique_ptr<Tokenizer> create(VocabData vocab);

  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // text must be valid UTF-8 (else Error(invalid_argument)). add_special adds
  // BOS/EOS as the vocab's add_bos/add_eos say; parse_special matches the
  // texts of control tokens (<|im_start|>, <s>) as those tokens. User-defined
  // tokens are always matched whole.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // Two texts joined into one input as the vocabulary's pair template
  // joins them (VocabData::has_pair), each encoded as encode(text, false,
  // true) would (special tokens' texts match, as in Hugging Face's pairs). budget > 0: the texts are first cut, their
  // tails going, until both fit in budget tokens with the template's own (truncate_pair). Throws Error(unsupported)
  // when the vocabulary has no pair template, Error(invalid_argument) for invalid UTF-8 or a budget smaller than the
  // template's tokens.
  struct Pair {
    std::vector<int32_t> ids;
    int32_t type1_from = -1;  // the first position of token type 1, -1: none
  };
  Pair encode_pair(std::string_view first, std::string_view second, int32_t budget = 0) const;
  // Tokens the pair template adds around the two texts.
  int32_t pair_special_count() const;
  // tokenizers' `longest_first` truncation of two texts' ids to `budget`
  // tokens in all: the longer gives up its tail first; when both are longer
  // than half the budget, each keeps half (the longer one the odd token).
  static void truncate_pair(std::vector<int32_t>& first, std::vector<int32_t>& second, size_t budget);

  // The raw bytes a token stands for ("▁a" -> " a", "<0x0A>" -> "\n",
  // "Ġa" -> " a"); may be part of a UTF-8 sequence. Control and unknown
  // tokens give their text only when render_special is set, else nothing.
  // Throws Error(invalid_argument) for an id outside [0, n_vocab).
  std::string token_to_bytes(int32_t id, bool render_special = false) const;

  // Valid UTF-8 (invalid byte runs become U+FFFD). skip_special drops control
  // and unknown tokens. With add_space_prefix (SPM) one leading space of the
  // result is removed, as Hugging Face's decoder does; tokenizer.json
  // tokenizers follow their file's decoder (see ByteStream).
  std::string decode(std::span<const int32_t> ids, bool skip_special) const;

  int32_t n_vocab() const { return static_cast<int32_t>(vocab_.tokens.size()); }
  int32_t bos() const { return vocab_.bos_id; }
  int32_t eos() const { return vocab_.eos_id; }
  // End of generation: EOS, the end-of-turn token, and control tokens such as
  // <|im_end|>, <|eot_id|>, <|endoftext|>.
  bool is_eog(int32_t id) const;
  // Control or unknown: what decode(skip_special) leaves out, except the
  // always-rendered ones.
  bool is_special(int32_t id) const;
  // A control token whose text every decode keeps: the structure of gpt-oss's
  // harmony turns (<|channel|>, <|message|>, <|start|>, <|end|>,
  // <|constrain|>), which the chat API reads back into reasoning, content
  // and tool calls (net/harmony_answer), as llama.cpp renders them.
  bool always_rendered(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < always_rendered_.size() && always_rendered_[static_cast<size_t>(id)];
  }
  // The id of the token spelled exactly so in the vocab ("<|im_end|>",
  // "Ġthe", "▁the"), or -1.
  int32_t find_token(std::string_view text) const;
  // Whether decoding removes one leading space (SPM with add_space_prefix).
  bool strips_leading_space() const { return strip_leading_space_; }
  const VocabData& vocab() const { return vocab_; }

  // The bytes decode() builds, one id at a time: special tokens skipped or
  // rendered, runs of byte-fallback tokens resolved together (Hugging Face's
  // ByteFallback decoder), the leading-space rule applied at the start.
  // decode() and IncrementalDecoder share it, so streamed text adds up to
  // decode(). The bytes may be invalid UTF-8; the caller repairs them.
  class ByteStream {
   public:
    // tokenizer must outlive the stream.
    ByteStream(const Tokenizer& tokenizer, bool skip_special);
    // Appends the bytes id settles (a byte token of a run settles nothing yet).
    void push(int32_t id, std::string& out);
    // Appends what is still held; the stream then starts over as if new.
    void finish(std::string& out);
    // Bytes of an unfinished run of byte tokens.
    size_t held_bytes() const { return run_.size(); }

   private:
    void emit(std::string piece, std::string& out);

    const Tokenizer& tokenizer_;
    bool skip_special_;
    std::string run_;
    bool first_ = true;   // no piece yet: the next one opens the text
    bool strip_pending_;  // the one leading space is still to strip
  };

 protected:
  explicit Tokenizer(VocabData vocab);

  // Encodes text holding no special token. at_text_start: it begins the
  // caller's text (SPM adds its space prefix only there).
  virtual void encode_text(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const = 0;

  TokenType type_of(int32_t id) const;
  // The id for an exact token text, or -1 (the last id wins on duplicates).
  int32_t lookup(std::string_view text) const;

  // The bytes a run of byte tokens decodes to: itself if valid UTF-8, else
  // one U+FFFD per byte, as Hugging Face's ByteFallback decoder does. Only
  // called when byte_runs_ is set. opens_text: the run starts the text.
  virtual std::string byte_run_text(std::string_view bytes, bool opens_text) const;

  VocabData vocab_;
  // [n_vocab] bytes of each token that is not control/unknown; the subclass
  // constructor fills it.
  std::vector<std::string> piece_bytes_;
  // How decoding renders pieces, for tokenizers built from a Hugging Face
  // decoder; the GGUF tokenizers leave the defaults.
  bool strip_leading_space_ = false;    // remove one leading space of the text
  bool byte_runs_ = false;              // byte tokens decode in runs (byte_run_text)
  bool special_from_pieces_ = false;    // special tokens render as piece_bytes_, not their text
  std::vector<std::string> first_piece_bytes_;  // [n_vocab] bytes of a token opening the text, or empty

 private:
  struct SpecialToken {
    std::string_view text;
    int32_t id;
    bool always;    // user-defined: matched even without parse_special
    uint8_t strip;  // VocabData::kLstrip | kRstrip: the whitespace beside a match is part of it
  };
  // Leftmost-longest special token match at text[pos], or nullptr.
  const SpecialToken* match_special(std::string_view text, size_t pos, bool parse_special) const;

  std::unordered_map<std::string_view, int32_t> ids_;  // views into vocab_.tokens
  std::array<std::vector<SpecialToken>, 256> specials_by_first_byte_;  // longest first
  std::vector<bool> eog_;
  std::vector<bool> always_rendered_;  // [n_vocab], or empty: none
};

}  // namespace troupe
