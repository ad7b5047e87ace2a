// BPE as Hugging Face's `tokenizers` runs it (models/bpe): a piece starts as
// one symbol per character (a vocab token, else its <0xNN> bytes with
// byte_fallback, else unk), then merges by rank. Decoding precomputes each
// token's bytes through the decoder's per-token rules.
#include "tokenizer/hf_bpe_tokenizer.hpp"
#include "tokenizer/text_util.hpp"

#include <cstdio>

#include "core/error.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe {
namespace {

// The ByteLevel decoder on one token: its characters as the bytes they stand
// for, or, if any character is outside the byte alphabet, the token's own
// UTF-8 unchanged.
std::string byte_level_bytes(std::string_view text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t len = utf8::sequence_length(text, pos);
    const int byte = len == 0 ? -1 : byte_level::char_to_byte(utf8::decode_at(text, pos, len));
    if (byte < 0) return std::string(text);
    out += static_cast<char>(byte);
    pos += len;
  }
  return out;
}

}  // namespace

HfBpeTokenizer::HfBpeTokenizer(VocabData vocab, HfPipeline pipeline)
    : Tokenizer(std::move(vocab)), pipeline_(std::move(pipeline)) {
  const int32_t n = n_vocab();
  const HfBpeModel& model = pipeline_.model;
  const HfDecoder& decoder = pipeline_.decoder;
  if (model.in_model.size() != static_cast<size_t>(n)) {
    throw Error(Errc::internal, "tokenizer.json: model membership has " + std::to_string(model.in_model.size()) +
                                    " entries for " + std::to_string(n) + " tokens");
  }
  model_ids_.reserve(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    if (model.in_model[static_cast<size_t>(id)]) model_ids_.emplace(vocab_.tokens[static_cast<size_t>(id)], id);
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[static_cast<size_t>(b)] = model_id(name);
  }
  for (size_t rank = 0; rank < model.merges.size(); ++rank) {
    const auto [left, right] = model.merges[rank];
    if (left < 0 || right < 0 || left >= n || right >= n) {
      throw Error(Errc::bad_format, "tokenizer.json: model.merges[" + std::to_string(rank) +
                                        "] names a token id outside the vocabulary");
    }
    const std::string& l = vocab_.tokens[static_cast<size_t>(left)];
    const std::string& r = vocab_.tokens[static_cast<size_t>(right)];
    const int32_t merged = model_id(l + r);
    if (merged < 0) {
      throw Error(Errc::bad_format, "tokenizer.json: model.merges[" + std::to_string(rank) + "] ('" +
                                        l + "' '" + r + "') makes a token that is not in model.vocab");
    }
    // Hugging Face collects merges into a map, so a repeated pair keeps its last rank.
    merges_.add(left, right, merged, true);
  }

  // Decoding: each token's bytes through the decoder, special tokens too.
  strip_leading_space_ = decoder.strip_leading_space;
  byte_runs_ = decoder.byte_fallback;
  special_from_pieces_ = true;
  HfDecodedPieces pieces = render_hf_decoder(decoder, vocab_);
  piece_bytes_ = std::move(pieces.piece_bytes);
  first_piece_bytes_ = std::move(pieces.first_piece_bytes);
}

HfDecodedPieces render_hf_decoder(const HfDecoder& decoder, VocabData& vocab) {
  const size_t n = vocab.tokens.size();
  bool opening_differs = false;
  for (const HfDecoder::Replace& r : decoder.after) opening_differs = opening_differs || r.drop_when_opening;
  if (vocab.token_types.empty()) vocab.token_types.assign(n, static_cast<int32_t>(TokenType::normal));
  HfDecodedPieces out;
  out.piece_bytes.resize(n);
  if (opening_differs) out.first_piece_bytes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = vocab.tokens[i];
    const int byte = decoder.byte_fallback ? parse_byte_piece(text) : -1;
    if (byte >= 0) {
      int32_t& type = vocab.token_types[i];
      if (type == 0 || type == static_cast<int32_t>(TokenType::normal)) type = static_cast<int32_t>(TokenType::byte);
      out.piece_bytes[i] = std::string(1, static_cast<char>(byte));
      if (opening_differs) out.first_piece_bytes[i] = out.piece_bytes[i];
      continue;
    }
    std::string s = decoder.byte_level ? byte_level_bytes(text) : text;
    for (const HfDecoder::Replace& r : decoder.before) s = replace_all(s, r.from, r.to);
    if (opening_differs) out.first_piece_bytes[i] = hf_decoder_after(decoder, s, true);
    out.piece_bytes[i] = hf_decoder_after(decoder, std::move(s), false);
  }
  return out;
}

std::string hf_decoder_after(const HfDecoder& decoder, std::string text, bool opens_text) {
  for (const HfDecoder::Replace& r : decoder.after) {
    text = replace_all(text, r.from, opens_text && r.drop_when_opening ? std::string_view() : std::string_view(r.to));
  }
  return text;
}

std::string HfBpeTokenizer::byte_run_text(std::string_view bytes, bool opens_text) const {
  return hf_decoder_after(pipeline_.decoder, Tokenizer::byte_run_text(bytes, opens_text), opens_text);
}

int32_t HfBpeTokenizer::model_id(std::string_view text) const {
  const auto it = model_ids_.find(text);
  return it == model_ids_.end() ? -1 : it->second;
}

void HfBpeTokenizer::encode_text(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const {
  const std::string normalized = pipeline_.normalizer.apply(text);
  for (const std::string& piece : pipeline_.pre_tokenizer.split(normalized, at_text_start)) encode_word(piece, out);
}

void HfBpeTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  const HfBpeModel& model = pipeline_.model;
  if (model.ignore_merges) {
    if (const int32_t id = model_id(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  // An unknown character waits here: a run of them may fuse into one unk.
  bool unk_pending = false;
  for (size_t pos = 0; pos < word.size();) {
    const size_t len = utf8::sequence_length(word, pos);
    const std::string_view ch = word.substr(pos, len == 0 ? 1 : len);
    pos += ch.size();
    if (const int32_t id = model_id(ch); id >= 0) {
      if (unk_pending) symbols.push_back(model.unk_id);
      unk_pending = false;
      symbols.push_back(id);
      continue;
    }
    if (model.byte_fallback) {
      bool all = true;
      for (const char c : ch) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        // As in Hugging Face, byte tokens do not flush a waiting unk.
        for (const char c : ch) symbols.push_back(byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (model.unk_id < 0) continue;  // no unk token: the character is dropped
    if (unk_pending && !model.fuse_unk) symbols.push_back(model.unk_id);
    unk_pending = true;
  }
  if (unk_pending) symbols.push_back(model.unk_id);
  merges_.apply(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

}  // namespace troupe
