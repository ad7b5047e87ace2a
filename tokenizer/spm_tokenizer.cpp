// SentencePiece BPE as llama.cpp and Hugging Face's GGUF conversion run it.
// Where the two differ we follow Hugging Face: "▁" is prepended only at the
// very start of the text and only if the text does not already start with a
// space (Metaspace, prepend_scheme "first"), and unknown characters that
// cannot fall back to bytes fuse into one unk.
#include "tokenizer/spm_tokenizer.hpp"
#include "tokenizer/text_util.hpp"

#include <cstdio>
#include <queue>

#include "core/error.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 "▁"

struct SpmSymbol {
  uint32_t start;  // byte span in the escaped text
  uint32_t len;    // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t len;  // of the merged span, to spot stale entries
};

struct BigramOrder {
  // std::priority_queue pops the largest: best score, then leftmost.
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

SpmTokenizer::SpmTokenizer(VocabData vocab) : Tokenizer(std::move(vocab)) {
  const int32_t n = n_vocab();
  if (vocab_.scores.size() != vocab_.tokens.size()) {
    throw Error(Errc::bad_format, "tokenizer vocab: the llama (SentencePiece) model needs one score per token; got " +
                                      std::to_string(vocab_.scores.size()) + " scores for " +
                                      std::to_string(n) + " tokens");
  }
  piece_bytes_.resize(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = vocab_.tokens[static_cast<size_t>(id)];
    const int byte = type_of(id) == TokenType::byte ? parse_byte_piece(text) : -1;
    if (byte >= 0) {
      piece_bytes_[static_cast<size_t>(id)] = std::string(1, static_cast<char>(byte));
    } else if (type_of(id) == TokenType::user_defined) {
      piece_bytes_[static_cast<size_t>(id)] = text;
    } else {
      piece_bytes_[static_cast<size_t>(id)] = replace_all(text, kSpace, " ");
    }
  }
  bool all_bytes = true;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[static_cast<size_t>(b)] = lookup(name);
    all_bytes = all_bytes && byte_ids_[static_cast<size_t>(b)] >= 0;
  }
  if (!all_bytes && vocab_.unk_id < 0) {
    throw Error(Errc::bad_format,
                "tokenizer vocab: the llama model has neither all 256 <0xNN> byte tokens nor an unknown token, "
                "so some text could not be encoded");
  }
}

void SpmTokenizer::encode_unknown_char(std::string_view ch, std::vector<int32_t>& out, bool& last_was_unk) const {
  bool have_all = true;
  for (const char c : ch) have_all = have_all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
  if (have_all) {
    for (const char c : ch) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
    last_was_unk = false;
  } else if (!last_was_unk) {
    out.push_back(vocab_.unk_id);
    last_was_unk = true;
  }
}

void SpmTokenizer::encode_text(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const {
  std::string escaped = replace_all(text, " ", kSpace);
  if (vocab_.add_space_prefix && at_text_start && escaped.compare(0, kSpace.size(), kSpace) != 0) {
    escaped.insert(0, kSpace);
  }
  const std::string_view s = escaped;

  // One symbol per UTF-8 character (the caller validated the text).
  std::vector<SpmSymbol> symbols;
  symbols.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t len = utf8::sequence_length(s, pos);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(len), index - 1, index + 1});
    pos += len;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const SpmSymbol& l = symbols[static_cast<size_t>(left)];
    const SpmSymbol& r = symbols[static_cast<size_t>(right)];
    const uint32_t len = l.len + r.len;
    const int32_t id = lookup(s.substr(l.start, len));
    if (id < 0) return;
    queue.push({vocab_.scores[static_cast<size_t>(id)], left, right, len});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    SpmSymbol& l = symbols[static_cast<size_t>(b.left)];
    SpmSymbol& r = symbols[static_cast<size_t>(b.right)];
    // Stale: one side has merged with something else since this was queued.
    if (l.len == 0 || r.len == 0 || l.next != b.right || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  bool last_was_unk = false;
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const SpmSymbol& sym = symbols[static_cast<size_t>(i)];
    const std::string_view piece = s.substr(sym.start, sym.len);
    const int32_t id = lookup(piece);
    if (id >= 0) {
      out.push_back(id);
      last_was_unk = false;
    } else {
      // Only single characters can be missing: every merge made a vocab token.
      encode_unknown_char(piece, out, last_was_unk);
    }
  }
}

}  // namespace troupe
