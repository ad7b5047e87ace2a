// The model-independent half of Tokenizer: vocab checks, special-token
// splitting, BOS/EOS, decoding and token classes. The subword algorithms live
// in spm_tokenizer.cpp and bpe_tokenizer.cpp.
#include "tokenizer/tokenizer.hpp"

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "tokenizer/spm_tokenizer.hpp"
#include "tokenizer/unigram_tokenizer.hpp"
#include "tokenizer/utf8.hpp"
#include "tokenizer/wordpiece_tokenizer.hpp"

namespace troupe {
namespace {

// Bytes of the whitespace character (Unicode White_Space, as Rust's
// char::is_whitespace, which Hugging Face's lstrip/rstrip use) starting at
// text[pos], or 0.
size_t whitespace_at(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  const auto b = [&](size_t i) { return pos + i < text.size() ? static_cast<uint8_t>(text[pos + i]) : 0; };
  const uint8_t c = b(0);
  if (c == ' ' || (c >= 0x09 && c <= 0x0d)) return 1;
  if (c == 0xc2 && (b(1) == 0x85 || b(1) == 0xa0)) return 2;  // U+0085, U+00A0
  if (c == 0xe1 && b(1) == 0x9a && b(2) == 0x80) return 3;    // U+1680
  if (c == 0xe2 && b(1) == 0x80 && (b(2) <= 0x8a || b(2) == 0xa8 || b(2) == 0xa9 || b(2) == 0xaf) && b(2) >= 0x80) {
    return 3;  // U+2000..U+200A, U+2028, U+2029, U+202F
  }
  if (c == 0xe2 && b(1) == 0x81 && b(2) == 0x9f) return 3;  // U+205F
  if (c == 0xe3 && b(1) == 0x80 && b(2) == 0x80) return 3;  // U+3000
  return 0;
}

// Bytes of the whitespace character ending at text[end - 1], or 0.
size_t whitespace_before(std::string_view text, size_t end) {
  for (size_t n = 1; n <= 3 && n <= end; ++n) {
    if (whitespace_at(text, end - n) == n) return n;
  }
  return 0;
}

[[noreturn]] void bad_vocab(const std::string& what) {
  throw Error(Errc::bad_format, "tokenizer vocab: " + what);
}

void check_id(const VocabData& v, int32_t id, const char* field) {
  const auto n = static_cast<int64_t>(v.tokens.size());
  if (id < -1 || id >= n) {
    bad_vocab(std::string(field) + " " + std::to_string(id) + " is outside the vocabulary of " +
              std::to_string(n) + " tokens");
  }
}

void check_common(const VocabData& v) {
  const size_t n = v.tokens.size();
  if (n == 0) bad_vocab("no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) bad_vocab("too many tokens");
  if (!v.scores.empty() && v.scores.size() != n) {
    bad_vocab("scores has " + std::to_string(v.scores.size()) + " entries but there are " +
              std::to_string(n) + " tokens");
  }
  if (!v.added_strip.empty() && v.added_strip.size() != n) {
    bad_vocab("added_strip has " + std::to_string(v.added_strip.size()) + " entries but there are " +
              std::to_string(n) + " tokens");
  }
  if (!v.token_types.empty() && v.token_types.size() != n) {
    bad_vocab("token_types has " + std::to_string(v.token_types.size()) + " entries but there are " +
              std::to_string(n) + " tokens");
  }
  for (size_t i = 0; i < v.token_types.size(); ++i) {
    // 0 is llama.cpp's "undefined", read as normal.
    if (v.token_types[i] < 0 || v.token_types[i] > 6) {
      bad_vocab("token " + std::to_string(i) + " has type " + std::to_string(v.token_types[i]) +
                ", expected 1..6");
    }
  }
  check_id(v, v.bos_id, "bos_id");
  check_id(v, v.eos_id, "eos_id");
  check_id(v, v.unk_id, "unk_id");
  check_id(v, v.pad_id, "pad_id");
  check_id(v, v.eot_id, "eot_id");
}

// Control tokens that end a turn in the common chat formats.
constexpr std::string_view kEogTexts[] = {
    "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<|end|>",
    "<end_of_turn>", "<|end_of_text|>", "<|return|>", "</s>",
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::create(VocabData vocab) {
  if (vocab.model != "llama" && vocab.model != "gpt2" && vocab.model != "bert" && vocab.model != "t5") {
    throw Error(Errc::unsupported,
                "tokenizer model '" + vocab.model + "' is not supported; supported: llama, gpt2, bert, t5");
  }
  check_common(vocab);
  if (vocab.model == "llama") return std::make_unique<SpmTokenizer>(std::move(vocab));
  if (vocab.model == "bert") return wordpiece_from_gguf(std::move(vocab));
  if (vocab.model == "t5") return unigram_from_gguf(vocab);
  return std::make_unique<BpeTokenizer>(std::move(vocab));
}

Tokenizer::Tokenizer(VocabData vocab) : vocab_(std::move(vocab)) {
  const int32_t n = n_vocab();
  ids_.reserve(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) ids_[vocab_.tokens[static_cast<size_t>(id)]] = id;

  eog_.assign(static_cast<size_t>(n), false);
  if (vocab_.eos_id >= 0) eog_[static_cast<size_t>(vocab_.eos_id)] = true;
  if (vocab_.eot_id >= 0) eog_[static_cast<size_t>(vocab_.eot_id)] = true;

  for (int32_t id = 0; id < n; ++id) {
    const TokenType t = type_of(id);
    const std::string_view text = vocab_.tokens[static_cast<size_t>(id)];
    if (t == TokenType::control &&
        std::find(std::begin(kEogTexts), std::end(kEogTexts), text) != std::end(kEogTexts)) {
      eog_[static_cast<size_t>(id)] = true;
    }
    const bool matchable = t == TokenType::control || t == TokenType::unknown || t == TokenType::user_defined;
    if (matchable && !text.empty()) {
      const uint8_t strip = vocab_.added_strip.empty() ? 0 : vocab_.added_strip[static_cast<size_t>(id)];
      specials_by_first_byte_[static_cast<uint8_t>(text[0])].push_back({text, id, t == TokenType::user_defined, strip});
    }
  }
  // gpt-oss's harmony format (o200k_harmony): <|end|> closes one message of
  // the turn (the reasoning, a tool call's preamble) and the answer follows,
  // so it must not stop generation; <|return|> ends the turn and <|call|>
  // hands it to a tool. A vocabulary with both of those is taken as harmony,
  // as llama.cpp does.
  const auto control = [&](std::string_view text) {
    const auto it = ids_.find(text);
    return it != ids_.end() && type_of(it->second) == TokenType::control ? it->second : -1;
  };
  if (const int32_t ret = control("<|return|>"), call = control("<|call|>"); ret >= 0 && call >= 0) {
    eog_[static_cast<size_t>(call)] = true;
    if (const int32_t end = control("<|end|>"); end >= 0) eog_[static_cast<size_t>(end)] = false;
    always_rendered_.assign(static_cast<size_t>(n), false);
    for (std::string_view text : {"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>"}) {
      if (const int32_t id = control(text); id >= 0) always_rendered_[static_cast<size_t>(id)] = true;
    }
  }
  for (auto& list : specials_by_first_byte_) {
    std::stable_sort(list.begin(), list.end(),
                     [](const SpecialToken& a, const SpecialToken& b) { return a.text.size() > b.text.size(); });
  }
  strip_leading_space_ = vocab_.model == "llama" && vocab_.add_space_prefix;
}

TokenType Tokenizer::type_of(int32_t id) const {
  if (vocab_.token_types.empty()) return TokenType::normal;
  const int32_t t = vocab_.token_types[static_cast<size_t>(id)];
  return t == 0 ? TokenType::normal : static_cast<TokenType>(t);
}

int32_t Tokenizer::lookup(std::string_view text) const {
  const auto it = ids_.find(text);
  return it == ids_.end() ? -1 : it->second;
}

int32_t Tokenizer::find_token(std::string_view text) const { return lookup(text); }

bool Tokenizer::is_special(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return false;
  const TokenType t = type_of(id);
  return t == TokenType::control || t == TokenType::unknown;
}

int32_t Tokenizer::pair_special_count() const {
  const bool bos = vocab_.add_bos && vocab_.bos_id >= 0;
  return static_cast<int32_t>((bos ? 1 : 0) + vocab_.pair_between.size() + vocab_.pair_after.size());
}

void Tokenizer::truncate_pair(std::vector<int32_t>& first, std::vector<int32_t>& second, size_t budget) {
  if (first.size() + second.size() <= budget) return;
  const bool first_longer = first.size() > second.size();
  size_t n_short = std::min(first.size(), second.size());
  // The longer keeps what the shorter leaves, but never less than it.
  size_t n_long = n_short > budget ? n_short : std::max(n_short, budget - n_short);
  if (n_short + n_long > budget) {
    n_short = budget / 2;
    n_long = n_short + budget % 2;
  }
  std::vector<int32_t>& shorter = first_longer ? second : first;
  std::vector<int32_t>& longer = first_longer ? first : second;
  shorter.resize(std::min(shorter.size(), n_short));
  longer.resize(std::min(longer.size(), n_long));
}

Tokenizer::Pair Tokenizer::encode_pair(std::string_view first, std::string_view second, int32_t budget) const {
  if (!vocab_.has_pair) {
    throw Error(Errc::unsupported,
                "tokenizer: the vocabulary defines no pair template (its post-processor joins "
                "one text only), so it cannot join a query and a document");
  }
  // Special tokens' texts match as in Hugging Face's pair encoding (XLM-R's <mask>).
  std::vector<int32_t> a = encode(first, /*add_special=*/false, /*parse_special=*/true);
  std::vector<int32_t> b = encode(second, /*add_special=*/false, /*parse_special=*/true);
  if (budget > 0) {
    const int32_t specials = pair_special_count();
    if (budget <= specials) {
      throw Error(Errc::invalid_argument, "tokenizer: " + std::to_string(budget) +
                                              " tokens cannot hold two texts and the pair template's " +
                                              std::to_string(specials));
    }
    truncate_pair(a, b, static_cast<size_t>(budget - specials));
  }
  Pair p;
  p.ids.reserve(a.size() + b.size() + static_cast<size_t>(pair_special_count()));
  if (vocab_.add_bos && vocab_.bos_id >= 0) p.ids.push_back(vocab_.bos_id);
  p.ids.insert(p.ids.end(), a.begin(), a.end());
  for (size_t i = 0; i < vocab_.pair_between.size(); ++i) {
    if (static_cast<int32_t>(i) == vocab_.pair_type1_from) p.type1_from = static_cast<int32_t>(p.ids.size());
    p.ids.push_back(vocab_.pair_between[i]);
  }
  if (vocab_.pair_type1_from == static_cast<int32_t>(vocab_.pair_between.size())) {
    p.type1_from = static_cast<int32_t>(p.ids.size());
  }
  p.ids.insert(p.ids.end(), b.begin(), b.end());
  p.ids.insert(p.ids.end(), vocab_.pair_after.begin(), vocab_.pair_after.end());
  return p;
}

bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && eog_[static_cast<size_t>(id)];
}

const Tokenizer::SpecialToken* Tokenizer::match_special(std::string_view text, size_t pos,
                                                        bool parse_special) const {
  for (const SpecialToken& s : specials_by_first_byte_[static_cast<uint8_t>(text[pos])]) {
    if (!s.always && !parse_special) continue;
    if (text.compare(pos, s.text.size(), s.text) == 0) return &s;
  }
  return nullptr;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const size_t bad = utf8::first_invalid(text);
  if (bad != text.size()) {
    throw Error(Errc::invalid_argument,
                "tokenizer: input text is not valid UTF-8 at byte " + std::to_string(bad));
  }
  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos && vocab_.bos_id >= 0) out.push_back(vocab_.bos_id);

  // Special tokens cut the text into fragments that are encoded on their own,
  // like Hugging Face's added-token split (leftmost, then longest).
  size_t fragment = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const SpecialToken* s = match_special(text, pos, parse_special);
    if (s == nullptr) {
      ++pos;
      continue;
    }
    // lstrip / rstrip tokens take the whitespace beside them (Hugging Face's
    // added-token match widens over it), within the current fragment.
    size_t start = pos;
    if ((s->strip & VocabData::kLstrip) != 0) {
      while (start > fragment) {
        const size_t n = whitespace_before(text, start);
        if (n == 0) break;
        start -= n;
      }
    }
    if (start > fragment) encode_text(text.substr(fragment, start - fragment), fragment == 0, out);
    out.push_back(s->id);
    pos += s->text.size();
    if ((s->strip & VocabData::kRstrip) != 0) {
      while (const size_t n = whitespace_at(text, pos)) pos += n;
    }
    fragment = pos;
  }
  if (fragment < text.size()) encode_text(text.substr(fragment), fragment == 0, out);

  if (add_special && vocab_.add_eos && vocab_.eos_id >= 0) out.push_back(vocab_.eos_id);
  return out;
}

std::string Tokenizer::token_to_bytes(int32_t id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) {
    throw Error(Errc::invalid_argument, "tokenizer: token id " + std::to_string(id) +
                                            " is outside [0, " + std::to_string(n_vocab()) + ")");
  }
  if (is_special(id) && !render_special && !always_rendered(id)) return {};
  if (is_special(id) && !special_from_pieces_) return vocab_.tokens[static_cast<size_t>(id)];
  return piece_bytes_[static_cast<size_t>(id)];
}

std::string Tokenizer::byte_run_text(std::string_view bytes, bool /*opens_text*/) const {
  if (utf8::is_valid(bytes)) return std::string(bytes);
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) out += utf8::kReplacement;
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  ByteStream stream(*this, skip_special);
  std::string bytes;
  for (const int32_t id : ids) stream.push(id, bytes);
  stream.finish(bytes);
  return utf8::to_valid(bytes);
}

Tokenizer::ByteStream::ByteStream(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special), strip_pending_(tokenizer.strip_leading_space_) {}

void Tokenizer::ByteStream::push(int32_t id, std::string& out) {
  const Tokenizer& t = tokenizer_;
  std::string piece = t.token_to_bytes(id, !skip_special_);  // also checks the id
  // Skipped tokens are not there at all: they neither end a run nor open the text.
  if (skip_special_ && t.is_special(id) && !t.always_rendered(id)) return;
  if (t.byte_runs_ && t.type_of(id) == TokenType::byte) {
    run_ += piece;
    return;
  }
  if (!run_.empty()) {
    emit(t.byte_run_text(run_, first_), out);
    run_.clear();
    first_ = false;
  }
  if (first_ && !t.first_piece_bytes_.empty() && (!t.is_special(id) || t.special_from_pieces_)) {
    piece = t.first_piece_bytes_[static_cast<size_t>(id)];
  }
  first_ = false;
  emit(std::move(piece), out);
}

void Tokenizer::ByteStream::finish(std::string& out) {
  if (!run_.empty()) emit(tokenizer_.byte_run_text(run_, first_), out);
  run_.clear();
  first_ = true;
  strip_pending_ = tokenizer_.strip_leading_space_;
}

void Tokenizer::ByteStream::emit(std::string piece, std::string& out) {
  if (strip_pending_ && !piece.empty()) {
    if (piece.front() == ' ') piece.erase(0, 1);
    strip_pending_ = false;
  }
  out += piece;
}

}  // namespace troupe
