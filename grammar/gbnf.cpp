// A recursive-descent GBNF reader over the grammar text's bytes. Character
// classes become UTF-8 byte sequences: a code-point range is split where
// its encodings differ in length or in more than the trailing bytes, so
// each piece is one byte range a position.
#include "grammar/gbnf.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace troupe::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxNesting = 128;
constexpr int64_t kMaxRepeat = 10000;

int utf8_length(uint32_t cp) { return cp <= 0x7F ? 1 : cp <= 0x7FF ? 2 : cp <= 0xFFFF ? 3 : 4; }

std::string utf8_encode(uint32_t cp) {
  std::string s;
  if (cp <= 0x7F) {
    s.push_back(static_cast<char>(cp));
  } else if (cp <= 0x7FF) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp <= 0xFFFF) {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

// Sorted, merged; the complement over all code points when `negate`.
Ranges normalise(Ranges r, bool negate) {
  std::sort(r.begin(), r.end());
  Ranges merged;
  for (const auto& [lo, hi] : r) {
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.emplace_back(lo, hi);
    }
  }
  if (!negate) return merged;
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : merged) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  std::shared_ptr<const Grammar> run() {
    for (;;) {
      skip_space(true);
      if (eof()) break;
      rule();
    }
    for (const auto& [name, id] : rules_) {
      if (!defined_.contains(name)) throw Error(Errc::invalid_argument, "gbnf: rule '" + name + "' is used but never defined");
    }
    const auto root = rules_.find("root");
    if (root == rules_.end()) throw Error(Errc::invalid_argument, "gbnf: no rule named 'root'");
    g_.finish(root->second);
    return std::make_shared<const Grammar>(std::move(g_));
  }

 private:
  bool eof() const { return pos_ >= text_.size(); }
  char peek() const { return eof() ? '\0' : text_[pos_]; }

  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw Error(Errc::invalid_argument,
                "gbnf: line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what);
  }

  void skip_space(bool newline_ok) {
    while (!eof()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!eof() && peek() != '\n') ++pos_;
      } else if ((c == '\n' || c == '\r') && newline_ok) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string name() {
    const size_t start = pos_;
    while (!eof() && word_char(peek())) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  int32_t rule_id(const std::string& n) {
    auto it = rules_.find(n);
    if (it == rules_.end()) it = rules_.emplace(n, g_.declare(n)).first;
    return it->second;
  }

  void rule() {
    const std::string n = name();
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") fail("expected '::=' after '" + n + "'");
    pos_ += 3;
    skip_space(true);
    if (!defined_.insert(n).second) fail("rule '" + n + "' is defined twice");
    g_.define(rule_id(n), alternates(false));
    skip_space(false);
    if (!eof() && peek() != '\n' && peek() != '\r') fail(std::string("unexpected '") + peek() + "'");
  }

  std::vector<Alternative> alternates(bool nested) {
    std::vector<Alternative> alts{sequence(nested)};
    while (peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(sequence(nested));
    }
    return alts;
  }

  Alternative sequence(bool nested) {
    Alternative alt;
    while (!eof()) {
      const char c = peek();
      if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
      const size_t start = alt.size();
      item(alt);
      skip_space(nested);
      postfix(alt, start);
      skip_space(nested);
    }
    if (!nested && peek() == ')') fail("unexpected ')'");
    return alt;
  }

  void item(Alternative& alt) {
    const char c = peek();
    if (c == '"') {
      ++pos_;
      while (peek() != '"') {
        if (eof()) fail("unterminated string literal");
        Grammar::append_literal(alt, utf8_encode(code_point()));
      }
      ++pos_;
    } else if (c == '[') {
      ++pos_;
      alt.push_back(char_class());
    } else if (c == '.') {
      ++pos_;
      alt.push_back(class_symbol({{0, kMaxCodePoint}}));
    } else if (c == '(') {
      if (++depth_ > kMaxNesting) fail("groups nest deeper than 128");
      ++pos_;
      skip_space(true);
      std::vector<Alternative> alts = alternates(true);
      if (peek() != ')') fail("expected ')'");
      ++pos_;
      --depth_;
      alt.push_back(Grammar::ref(g_.add("group", std::move(alts))));
    } else if (c == '<' || c == '!') {
      fail("token terminals (<[id]>, <text>, !<...>) are not supported: write the text instead");
    } else if (word_char(c)) {
      alt.push_back(Grammar::ref(rule_id(name())));
    } else {
      fail(std::string("unexpected '") + c + "'");
    }
  }

  int64_t number() {
    const size_t start = pos_;
    int64_t v = 0;
    while (!eof() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepeat) fail("repetition counts above 10000 are not supported");
      ++pos_;
    }
    if (pos_ == start) fail("expected a number");
    return v;
  }

  void postfix(Alternative& alt, size_t start) {
    const char c = peek();
    int64_t lo = 0, hi = -1;
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_;
      lo = 1;
    } else if (c == '?') {
      ++pos_;
      hi = 1;
    } else if (c == '{') {
      ++pos_;
      skip_space(false);
      lo = number();
      skip_space(false);
      hi = lo;
      if (peek() == ',') {
        ++pos_;
        skip_space(false);
        hi = peek() == '}' ? -1 : number();
        skip_space(false);
      }
      if (peek() != '}') fail("expected '}'");
      ++pos_;
      if (hi >= 0 && hi < lo) fail("repetition {m,n} with n < m");
    } else {
      return;
    }
    if (start == alt.size()) fail(std::string("'") + c + "' repeats nothing");
    const Alternative body(alt.begin() + static_cast<ptrdiff_t>(start), alt.end());
    alt.resize(start);
    alt.push_back(g_.rep(body, static_cast<int32_t>(lo), static_cast<int32_t>(hi), "repeat"));
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int d = -1;
      if (c >= '0' && c <= '9') d = c - '0';
      if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      if (d < 0) fail("expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  // One character of a literal or class: an escape or a UTF-8 code point.
  uint32_t code_point() {
    if (eof()) fail("unexpected end of the grammar");
    const auto c = static_cast<uint8_t>(text_[pos_]);
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': return static_cast<uint8_t>(e);
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': {
          const uint32_t v = hex(8);
          if (v > kMaxCodePoint) fail("\\U escape above U+10FFFF");
          return v;
        }
        default:
          --pos_;
          fail(std::string("unknown escape '\\") + e + "'");
      }
    }
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > text_.size()) fail("invalid UTF-8");
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; ++i) {
      const auto b = static_cast<uint8_t>(text_[pos_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    if (utf8_length(cp) != n || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8");
    pos_ += static_cast<size_t>(n);
    return cp;
  }

  Symbol char_class() {
    const bool negate = peek() == '^';
    if (negate) ++pos_;
    Ranges ranges;
    while (peek() != ']') {
      if (eof()) fail("unterminated character class");
      const uint32_t lo = code_point();
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        hi = code_point();
        if (hi < lo) fail("character range with its end before its start");
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;
    const Ranges set = normalise(std::move(ranges), negate);
    if (set.empty()) fail("a character class that matches nothing");
    return class_symbol(set);
  }

  // ASCII-only sets are one byte set; others a rule of UTF-8 sequences.
  Symbol class_symbol(const Ranges& set) {
    ByteSet ascii;
    std::vector<Alternative> alts;
    for (const auto& [lo, hi] : set) {
      if (lo <= 0x7F) ascii.add_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(std::min<uint32_t>(hi, 0x7F)));
      if (hi > 0x7F) utf8_alternatives(std::max<uint32_t>(lo, 0x80), hi, alts);
    }
    if (alts.empty()) return Grammar::bytes(ascii);
    if (!ascii.empty()) alts.insert(alts.begin(), {Grammar::bytes(ascii)});
    return Grammar::ref(g_.add("class", std::move(alts)));
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  Grammar g_;
  std::map<std::string, int32_t> rules_;
  std::set<std::string> defined_;
};

}  // namespace

void utf8_alternatives(uint32_t lo, uint32_t hi, std::vector<Alternative>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // surrogates are not characters
    if (lo < 0xD800) utf8_alternatives(lo, 0xD7FF, out);
    if (hi > 0xDFFF) utf8_alternatives(0xE000, hi, out);
    return;
  }
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {  // one encoded length a piece
    if (lo <= edge && hi > edge) {
      utf8_alternatives(lo, edge, out);
      utf8_alternatives(edge + 1, hi, out);
      return;
    }
  }
  const int n = utf8_length(lo);
  for (int i = 1; i < n; ++i) {
    // The low 6*i bits are trailing bytes: split until, above them, lo
    // and hi agree, or the trailing bytes run over their whole range.
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_alternatives(lo, lo | m, out);
        utf8_alternatives((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_alternatives(lo, (hi & ~m) - 1, out);
        utf8_alternatives(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = utf8_encode(lo), b = utf8_encode(hi);
  Alternative alt;
  for (size_t k = 0; k < a.size(); ++k) alt.push_back(Grammar::range(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k])));
  out.push_back(std::move(alt));
}

std::shared_ptr<const Grammar> gbnf_grammar(std::string_view text) { return GbnfParser(text).run(); }

}  // namespace troupe::grammar
