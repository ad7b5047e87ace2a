// Byte-level BPE: rank-ordered merges over a piece's bytes, lowest rank first
// and leftmost on ties, as Hugging Face's BPE model and llama.cpp do.
#include "tokenizer/bpe_tokenizer.hpp"

#include "core/error.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe {
namespace {

// The bytes a byte-level token stands for. Characters outside the alphabet
// (a vocab that stores some tokens as plain text) stand for their own UTF-8.
std::string byte_level_to_bytes(std::string_view text) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t len = utf8::sequence_length(text, pos);
    if (len == 0) {  // not UTF-8 at all: keep the byte
      out += text[pos++];
      continue;
    }
    const int byte = byte_level::char_to_byte(utf8::decode_at(text, pos, len));
    if (byte >= 0) out += static_cast<char>(byte);
    else out.append(text.substr(pos, len));
    pos += len;
  }
  return out;
}

}  // namespace

BpeTokenizer::BpeTokenizer(VocabData vocab) : Tokenizer(std::move(vocab)), pre_(vocab_.pre) {
  const int32_t n = n_vocab();
  piece_bytes_.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = vocab_.tokens[static_cast<size_t>(id)];
    // User-defined tokens are matched and rendered as their literal text.
    piece_bytes_[static_cast<size_t>(id)] =
        type_of(id) == TokenType::user_defined ? text : byte_level_to_bytes(text);
  }
  for (int b = 0; b < 256; ++b) {
    std::string stand_in;
    utf8::append(stand_in, byte_level::byte_to_char()[static_cast<size_t>(b)]);
    byte_ids_[static_cast<size_t>(b)] = lookup(stand_in);
  }

  for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
    const std::string& m = vocab_.merges[rank];
    const size_t space = m.find(' ');
    auto fail = [&](const std::string& why) {
      throw Error(Errc::bad_format, "tokenizer vocab: merge " + std::to_string(rank) + " '" + m + "' " + why);
    };
    if (space == std::string::npos || space == 0 || space + 1 == m.size()) fail("is not two tokens split by a space");
    const std::string_view left = std::string_view(m).substr(0, space);
    const std::string_view right = std::string_view(m).substr(space + 1);
    const int32_t left_id = lookup(left);
    const int32_t right_id = lookup(right);
    const int32_t merged_id = lookup(std::string(left) + std::string(right));
    if (left_id < 0 || right_id < 0) fail("names a token that is not in the vocabulary");
    if (merged_id < 0) fail("makes a token that is not in the vocabulary");
    // The first (best-ranked) occurrence of a pair wins, as in llama.cpp.
    merges_.add(left_id, right_id, merged_id);
  }
}

void BpeTokenizer::encode_text(std::string_view text, bool /*at_text_start*/, std::vector<int32_t>& out) const {
  for (const std::string_view piece : pre_.split(text)) encode_piece(piece, out);
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  for (const char c : piece) {
    int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    // A vocab without this byte: unk if there is one, else the byte is dropped
    // (what Hugging Face's BPE does without an unk token).
    if (id < 0) id = vocab_.unk_id;
    if (id >= 0) symbols.push_back(id);
  }
  merges_.apply(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

}  // namespace troupe
