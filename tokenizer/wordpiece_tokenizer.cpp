// WordPiece as Hugging Face's `tokenizers` runs it (models/wordpiece): each
// word is cut greedily into the longest vocab entries from its start, every
// piece after the first spelled with the continuing prefix; if any position
// matches nothing, or the word is too long, the whole word is the unk token.
// Decoding precomputes each token's text as the WordPiece decoder renders it
// in the middle of a text and at its start.
#include "tokenizer/wordpiece_tokenizer.hpp"

#include "core/error.hpp"
#include "tokenizer/text_util.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe {

std::string wordpiece_cleanup(std::string_view text) {
  static constexpr std::string_view kRules[][2] = {
      {" .", "."},   {" ?", "?"},           {" !", "!"},   {" ,", ","},     {" ' ", "'"},    {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
  };
  std::string s(text);
  for (const auto& [from, to] : kRules) s = replace_all(s, from, to);
  return s;
}

WordPieceTokenizer::WordPieceTokenizer(VocabData vocab, WordPiecePipeline pipeline)
    : Tokenizer(std::move(vocab)), pipeline_(std::move(pipeline)) {
  const int32_t n = n_vocab();
  const WordPieceModel& model = pipeline_.model;
  if (model.in_model.size() != static_cast<size_t>(n)) {
    throw Error(Errc::internal, "tokenizer.json: model membership has " + std::to_string(model.in_model.size()) +
                                    " entries for " + std::to_string(n) + " tokens");
  }
  if (model.unk_id < 0 || model.unk_id >= n || !model.in_model[static_cast<size_t>(model.unk_id)]) {
    throw Error(Errc::bad_format, "tokenizer.json: model.unk_token is not in model.vocab");
  }
  model_ids_.reserve(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    if (model.in_model[static_cast<size_t>(id)]) model_ids_.emplace(vocab_.tokens[static_cast<size_t>(id)], id);
  }

  // Decoding: every token (special ones too, when rendered) as the decoder
  // spells it after another token, and as the first token of the text.
  const WordPieceDecoder& decoder = pipeline_.decoder;
  special_from_pieces_ = true;
  if (vocab_.token_types.empty()) {
    vocab_.token_types.assign(static_cast<size_t>(n), static_cast<int32_t>(TokenType::normal));
  }
  piece_bytes_.resize(static_cast<size_t>(n));
  first_piece_bytes_.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    const auto i = static_cast<size_t>(id);
    const std::string& text = vocab_.tokens[i];
    // Hugging Face strips the prefix only when it is there (an empty prefix always is).
    std::string middle =
        text.compare(0, decoder.prefix.size(), decoder.prefix) == 0 ? text.substr(decoder.prefix.size()) : " " + text;
    piece_bytes_[i] = decoder.cleanup ? wordpiece_cleanup(middle) : std::move(middle);
    first_piece_bytes_[i] = decoder.cleanup ? wordpiece_cleanup(text) : text;
  }
}

int32_t WordPieceTokenizer::model_id(std::string_view text) const {
  const auto it = model_ids_.find(text);
  return it == model_ids_.end() ? -1 : it->second;
}

void WordPieceTokenizer::encode_text(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const {
  const std::string normalized = pipeline_.normalizer.apply(text);
  for (const std::string& word : pipeline_.pre_tokenizer.split(normalized, at_text_start)) encode_word(word, out);
}

void WordPieceTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  const WordPieceModel& model = pipeline_.model;
  // Where each character starts, then word.size(): pieces end on characters.
  std::vector<size_t> starts;
  starts.reserve(word.size() + 1);
  for (size_t pos = 0; pos < word.size();) {
    starts.push_back(pos);
    const size_t len = utf8::sequence_length(word, pos);
    pos += len == 0 ? 1 : len;
  }
  const size_t n_chars = starts.size();
  starts.push_back(word.size());
  if (n_chars > model.max_input_chars_per_word) {
    out.push_back(model.unk_id);
    return;
  }
  const size_t first_piece = out.size();
  std::string candidate;
  for (size_t begin = 0; begin < n_chars;) {
    // The longest vocab entry starting at character `begin`.
    int32_t found = -1;
    size_t end = n_chars;
    for (; end > begin; --end) {
      const std::string_view piece = word.substr(starts[begin], starts[end] - starts[begin]);
      if (begin == 0) {
        found = model_id(piece);
      } else {
        candidate.assign(model.continuing_subword_prefix).append(piece);
        found = model_id(candidate);
      }
      if (found >= 0) break;
    }
    if (found < 0) {
      out.resize(first_piece);
      out.push_back(model.unk_id);
      return;
    }
    out.push_back(found);
    begin = end;
  }
}

}  // namespace troupe
