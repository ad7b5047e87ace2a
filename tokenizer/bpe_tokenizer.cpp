// Byte-level BPE: rank-ordered merges over a piece's bytes, lowest rank first
// and leftmost on ties, as Hugging Face's BPE model and llama.cpp do.
#include "tokenizer/bpe_tokenizer.hpp"

#include <queue>

#include "core/error.hpp"
#include "tokenizer/byte_level.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

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

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t left;   // symbol index
  int32_t right;
  int32_t left_id;
  int32_t right_id;
  int32_t merged_id;
};

struct CandidateOrder {
  // std::priority_queue pops the largest: lowest rank, then leftmost.
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

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

  merges_.reserve(vocab_.merges.size());
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
    // The first (best-ranked) occurrence of a pair wins.
    merges_.emplace(pair_key(left_id, right_id), Merge{static_cast<int32_t>(rank), merged_id});
  }
}

const BpeTokenizer::Merge* BpeTokenizer::find_merge(int32_t left, int32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeTokenizer::encode_text(std::string_view text, bool /*at_text_start*/, std::vector<int32_t>& out) const {
  for (const std::string_view piece : pre_.split(text)) encode_piece(piece, out);
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (const char c : piece) {
    int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    // A vocab without this byte: unk if there is one, else the byte is dropped
    // (what Hugging Face's BPE does without an unk token).
    if (id < 0) id = vocab_.unk_id;
    if (id < 0) continue;
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t left_id = symbols[static_cast<size_t>(left)].id;
    const int32_t right_id = symbols[static_cast<size_t>(right)].id;
    if (const Merge* m = find_merge(left_id, right_id)) {
      queue.push({m->rank, left, right, left_id, right_id, m->id});
    }
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = symbols[static_cast<size_t>(c.left)];
    Symbol& r = symbols[static_cast<size_t>(c.right)];
    // Stale: a side has merged since this was queued.
    if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id || r.id != c.right_id) continue;
    l.id = c.merged_id;
    r.alive = false;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = c.left;
    try_add(l.prev, c.left);
    try_add(c.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) out.push_back(symbols[static_cast<size_t>(i)].id);
}

}  // namespace troupe
