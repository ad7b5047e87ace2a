// Unigram as Hugging Face's `tokenizers` runs it (models/unigram, its
// "optimized" encode, after SentencePiece's): left to right over a word's
// characters, every piece that starts there extends the best path to where
// it ends (a strictly higher score wins, so the first found keeps ties); a
// character no single piece covers is an unk step scored the lowest piece
// score less 10. The best path is read back from the end, runs of unk steps
// fused into one string, and each string becomes its piece, its <0xNN>
// bytes (byte_fallback) or unk.
#include "tokenizer/unigram_tokenizer.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>

#include "core/error.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe {

// A byte trie over the pieces: each node's children are contiguous and
// sorted by byte, so a prefix search is one binary search per byte.
class UnigramTokenizer::PieceTrie {
 public:
  // pieces: (text, id); for equal texts the last id listed counts.
  explicit PieceTrie(std::vector<std::pair<std::string_view, int32_t>> pieces) {
    std::stable_sort(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    nodes_.push_back({});
    // Built depth-first with an explicit stack (a piece may be long): a node
    // owns the pieces [lo, hi), which share its first `depth` bytes.
    struct Range {
      uint32_t node;
      size_t lo, hi, depth;
    };
    std::vector<Range> stack{{0, 0, pieces.size(), 0}};
    while (!stack.empty()) {
      const Range r = stack.back();
      stack.pop_back();
      size_t lo = r.lo;
      for (; lo < r.hi && pieces[lo].first.size() == r.depth; ++lo) nodes_[r.node].id = pieces[lo].second;
      nodes_[r.node].first_edge = static_cast<uint32_t>(labels_.size());
      while (lo < r.hi) {
        const char c = pieces[lo].first[r.depth];
        size_t end = lo;
        while (end < r.hi && pieces[end].first[r.depth] == c) ++end;
        const auto child = static_cast<uint32_t>(nodes_.size());
        nodes_.push_back({});
        labels_.push_back(static_cast<uint8_t>(c));
        children_.push_back(child);
        stack.push_back({child, lo, end, r.depth + 1});
        lo = end;
      }
      nodes_[r.node].n_edges = static_cast<uint32_t>(labels_.size()) - nodes_[r.node].first_edge;
    }
  }

  // visit(length, id) for every piece that text[start...] begins with, shortest first.
  template <typename Visit>
  void prefixes(std::string_view text, size_t start, Visit visit) const {
    uint32_t node = 0;
    for (size_t pos = start; pos < text.size(); ++pos) {
      const Node& n = nodes_[node];
      const auto first = labels_.begin() + n.first_edge;
      const auto last = first + n.n_edges;
      const auto c = static_cast<uint8_t>(text[pos]);
      const auto it = std::lower_bound(first, last, c);
      if (it == last || *it != c) return;
      node = children_[static_cast<size_t>(it - labels_.begin())];
      if (nodes_[node].id >= 0) visit(pos + 1 - start, nodes_[node].id);
    }
  }

 private:
  struct Node {
    int32_t id = -1;  // the piece ending here, if any
    uint32_t first_edge = 0;
    uint32_t n_edges = 0;
  };
  std::vector<Node> nodes_;         // [0] is the root
  std::vector<uint8_t> labels_;     // [n_edges] the byte of each edge, sorted within a node
  std::vector<uint32_t> children_;  // [n_edges] the node each edge leads to
};

UnigramTokenizer::~UnigramTokenizer() = default;

UnigramTokenizer::UnigramTokenizer(VocabData vocab, UnigramPipeline pipeline)
    : Tokenizer(std::move(vocab)), pipeline_(std::move(pipeline)) {
  const int32_t n = n_vocab();
  const UnigramModel& model = pipeline_.model;
  if (model.scores.size() > static_cast<size_t>(n)) {
    throw Error(Errc::internal, "tokenizer.json: " + std::to_string(model.scores.size()) + " Unigram pieces for " +
                                    std::to_string(n) + " tokens");
  }
  const auto n_pieces = static_cast<int32_t>(model.scores.size());
  if (model.unk_id < 0 || model.unk_id >= n_pieces) {
    throw Error(Errc::bad_format, "tokenizer.json: model.unk_id " + std::to_string(model.unk_id) +
                                      " is not a piece of model.vocab (" + std::to_string(n_pieces) + " pieces)");
  }
  std::vector<std::pair<std::string_view, int32_t>> pieces;
  pieces.reserve(model.scores.size());
  piece_ids_.reserve(model.scores.size());
  double min_score = std::numeric_limits<double>::infinity();
  for (int32_t id = 0; id < n_pieces; ++id) {
    const std::string_view text = vocab_.tokens[static_cast<size_t>(id)];
    pieces.emplace_back(text, id);
    piece_ids_[text] = id;
    min_score = std::min(min_score, model.scores[static_cast<size_t>(id)]);
  }
  unk_score_ = min_score - 10.0;
  trie_ = std::make_unique<const PieceTrie>(std::move(pieces));
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[static_cast<size_t>(b)] = piece_id(name);
  }

  // Decoding: each token's bytes through the decoder, special tokens too.
  const HfDecoder& decoder = pipeline_.decoder;
  strip_leading_space_ = decoder.strip_leading_space;
  byte_runs_ = decoder.byte_fallback;
  special_from_pieces_ = true;
  HfDecodedPieces rendered = render_hf_decoder(decoder, vocab_);
  piece_bytes_ = std::move(rendered.piece_bytes);
  first_piece_bytes_ = std::move(rendered.first_piece_bytes);
}

std::string UnigramTokenizer::byte_run_text(std::string_view bytes, bool opens_text) const {
  return hf_decoder_after(pipeline_.decoder, Tokenizer::byte_run_text(bytes, opens_text), opens_text);
}

int32_t UnigramTokenizer::piece_id(std::string_view text) const {
  const auto it = piece_ids_.find(text);
  return it == piece_ids_.end() ? -1 : it->second;
}

void UnigramTokenizer::encode_text(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const {
  const std::string normalized = pipeline_.normalizer.apply(text);
  for (const std::string& word : pipeline_.pre_tokenizer.split(normalized, at_text_start)) encode_word(word, out);
}

void UnigramTokenizer::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  const UnigramModel& model = pipeline_.model;
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  // The best path found so far to each byte offset: its score, its last
  // piece and where that piece starts.
  struct Best {
    double score = 0;
    int32_t id = -1;
    size_t start = kNone;
  };
  std::vector<Best> best(word.size() + 1);
  auto offer = [&](size_t start, size_t end, int32_t id, double score) {
    Best& b = best[end];
    const double total = best[start].score + score;
    if (b.start == kNone || total > b.score) b = {total, id, start};
  };
  for (size_t start = 0; start < word.size();) {
    const size_t len = utf8::sequence_length(word, start);
    const size_t char_len = len == 0 ? 1 : len;
    bool single = false;  // a piece covers exactly this character
    trie_->prefixes(word, start, [&](size_t piece_len, int32_t id) {
      offer(start, start + piece_len, id, model.scores[static_cast<size_t>(id)]);
      single = single || piece_len == char_len;
    });
    if (!single) offer(start, start + char_len, model.unk_id, unk_score_);
    start += char_len;
  }

  // Back from the end: spans of the best path, consecutive unk steps fused.
  std::vector<std::pair<size_t, size_t>> spans;
  size_t unk_end = kNone;  // the end of the unk run being read, if any
  for (size_t end = word.size(); end > 0;) {
    const Best& b = best[end];
    if (b.id == model.unk_id) {
      if (unk_end == kNone) unk_end = end;
    } else {
      if (unk_end != kNone) spans.emplace_back(end, unk_end);
      unk_end = kNone;
      spans.emplace_back(b.start, end);
    }
    end = b.start;
  }
  if (unk_end != kNone) spans.emplace_back(0, unk_end);

  for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
    const std::string_view s = word.substr(it->first, it->second - it->first);
    if (const int32_t id = piece_id(s); id >= 0) {
      out.push_back(id);
      continue;
    }
    if (model.byte_fallback) {
      bool all = true;
      for (const char c : s) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (const char c : s) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    out.push_back(model.unk_id);
  }
}

}  // namespace troupe
