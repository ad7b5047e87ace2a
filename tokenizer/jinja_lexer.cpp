// Template lexer (see jinja_lexer.hpp). It follows Jinja's lexer rules for
// the settings transformers uses, so that the whitespace a template emits is
// byte-identical: "-" strips all whitespace on that side, lstrip_blocks drops
// the indentation before a {% or {# that starts a line, trim_blocks drops the
// newline right after %} or #}.
#include "tokenizer/jinja_lexer.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "tokenizer/jinja_text.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe::jinja {

std::string at(Pos pos, const std::string& what) {
  return "chat template " + std::to_string(pos.line) + ":" + std::to_string(pos.col) + ": " + what;
}

namespace {

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t open = find_open(pos_);
      if (open == std::string::npos) {
        emit_text(src_.substr(pos_));
        break;
      }
      root_tag(open);
    }
    Token eof;
    eof.kind = TokKind::eof;
    eof.pos = pos_of(src_.size());
    out_.push_back(std::move(eof));
    return std::move(out_);
  }

 private:
  // Tokens come in source order, so positions advance from the last one
  // (linear in the template, even for one very long line); errors may look back.
  Pos pos_of(size_t offset) {
    if (offset >= cursor_off_) {
      for (size_t i = cursor_off_; i < offset; ++i) {
        const char c = src_[i];
        if (c == '\n') {
          ++cursor_pos_.line;
          cursor_pos_.col = 1;
        } else if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {
          ++cursor_pos_.col;
        }
      }
      cursor_off_ = offset;
      return cursor_pos_;
    }
    return pos_looking_back(offset);
  }

  Pos pos_looking_back(size_t offset) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    const size_t start = line_starts_[line - 1];
    return Pos{static_cast<int>(line),
               static_cast<int>(text::length(std::string_view(src_).substr(start, offset - start))) + 1};
  }

  [[noreturn]] void fail(size_t offset, const std::string& what) {
    throw Error(Errc::bad_format, at(pos_of(offset), what));
  }

  size_t find_open(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // Length of the Python whitespace code point at i, or 0.
  size_t space_at(size_t i) const {
    if (i >= src_.size()) return 0;
    size_t len = utf8::sequence_length(src_, i);
    if (len == 0) return 0;
    return text::is_space(utf8::decode_at(src_, i, len)) ? len : 0;
  }
  size_t skip_spaces(size_t i) const {
    while (size_t len = space_at(i)) i += len;
    return i;
  }
  bool starts(size_t i, std::string_view s) const { return src_.compare(i, s.size(), s) == 0; }

  void emit(TokKind kind, std::string text, size_t offset, Value value = Value()) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.value = std::move(value);
    t.pos = pos_of(offset);
    out_.push_back(std::move(t));
  }
  void emit_text(std::string text) {  // text needs no position: nothing in it can fail
    if (text.empty()) return;
    Token t;
    t.kind = TokKind::text;
    t.text = std::move(text);
    out_.push_back(std::move(t));
  }

  // Text before a tag, with the tag's whitespace control applied. sign is
  // the tag's modifier ('-', '+' or 0); lstrip: the tag is a block or comment.
  std::string control_text(std::string text, char sign, bool lstrip) const {
    if (sign == '-') return text::strip(text, std::nullopt, false, true);
    if (sign == '+' || !lstrip) return text;
    const size_t line_pos = text.rfind('\n') + 1;  // npos + 1 == 0
    if (line_pos == 0 && !line_starting_) return text;
    if (line_pos == text.size()) return text;
    std::u32string tail = text::decode(std::string_view(text).substr(line_pos));
    if (std::all_of(tail.begin(), tail.end(), text::is_space)) text.resize(line_pos);
    return text;
  }

  // The end of a tag closer at i ("%}" style, closer_len bytes after an
  // optional sign already consumed): trims per the sign and trim_blocks.
  size_t after_close(size_t i, char sign, bool trim) {
    if (sign == '-') i = skip_spaces(i);
    else if (sign != '+' && trim && i < src_.size() && src_[i] == '\n') ++i;
    line_starting_ = i > 0 && src_[i - 1] == '\n';
    return i;
  }

  // `{% raw %}` at open: returns the end of the opener, or npos.
  size_t raw_opener(size_t open) const {
    size_t i = open + 2;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) ++i;
    i = skip_spaces(i);
    if (!starts(i, "raw")) return std::string::npos;
    i = skip_spaces(i + 3);
    if (starts(i, "-%}")) return skip_spaces(i + 3);
    if (starts(i, "%}")) return i + 2;
    return std::string::npos;
  }

  void root_tag(size_t open) {
    const char type = src_[open + 1];
    size_t i = open + 2;
    char sign = 0;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) sign = src_[i++];
    std::string before = src_.substr(pos_, open - pos_);
    const size_t raw_end = type == '%' ? raw_opener(open) : std::string::npos;
    emit_text(control_text(std::move(before), sign, type != '{'));
    if (raw_end != std::string::npos) {
      line_starting_ = src_[raw_end - 1] == '\n';
      raw_body(open, raw_end);
    } else if (type == '#') {
      comment(open, i);
    } else {
      tag(open, i, type == '%');
    }
  }

  void raw_body(size_t open, size_t from) {
    for (size_t i = src_.find("{%", from); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t j = i + 2;
      char sign = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) sign = src_[j++];
      j = skip_spaces(j);
      if (!starts(j, "endraw")) continue;
      j = skip_spaces(j + 6);
      char close_sign = 0;
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) close_sign = src_[j++];
      if (!starts(j, "%}")) continue;
      emit_text(control_text(src_.substr(from, i - from), sign, true));
      pos_ = after_close(j + 2, close_sign, true);
      return;
    }
    fail(open, "missing end of raw directive");
  }

  void comment(size_t open, size_t body) {
    if (body == src_.size()) {  // "{#" ending the template: Jinja's lexer just stops there
      pos_ = body;
      return;
    }
    size_t close = src_.find("#}", body);
    if (close == std::string::npos) fail(open, "missing end of comment tag");
    char sign = 0;
    if (close > body && (src_[close - 1] == '-' || src_[close - 1] == '+')) sign = src_[close - 1];
    pos_ = after_close(close + 2, sign, true);
  }

  void tag(size_t open, size_t i, bool block) {
    emit(block ? TokKind::block_begin : TokKind::var_begin, block ? "{%" : "{{", open);
    std::vector<char> brackets;  // closers expected, innermost last
    while (true) {
      i = skip_spaces(i);
      if (i >= src_.size()) fail(open, std::string("unexpected end of template, expected '") +
                                           (block ? "%}" : "}}") + "'");
      if (brackets.empty()) {
        const std::string_view close = block ? "%}" : "}}";
        char sign = 0;
        size_t j = i;
        if ((src_[j] == '-' || (block && src_[j] == '+')) && starts(j + 1, close)) sign = src_[j++];
        if (starts(j, close)) {
          emit(block ? TokKind::block_end : TokKind::var_end, std::string(close), i);
          pos_ = after_close(j + 2, sign, block);
          return;
        }
      }
      i = token(i, brackets);
    }
  }

  size_t token(size_t i, std::vector<char>& brackets) {
    const char c = src_[i];
    if (c >= '0' && c <= '9') return number(i);
    if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      size_t j = i;
      while (j < src_.size() && (src_[j] == '_' || std::isalnum(static_cast<unsigned char>(src_[j])))) ++j;
      emit(TokKind::name, src_.substr(i, j - i), i);
      return j;
    }
    if (c == '\'' || c == '"') return string(i);
    for (std::string_view two : {"//", "**", "==", "!=", ">=", "<="}) {
      if (starts(i, two)) {
        emit(TokKind::op, std::string(two), i);
        return i + 2;
      }
    }
    if (std::string_view("+-*/%~()[]{}<>=.:|,;").find(c) == std::string_view::npos) {
      const size_t len = std::max<size_t>(1, utf8::sequence_length(src_, i));  // the whole character, so messages stay UTF-8
      fail(i, "unexpected character '" + src_.substr(i, len) + "'");
    }
    if (c == '(' || c == '[' || c == '{') brackets.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
    if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty()) fail(i, "unexpected '" + std::string(1, c) + "'");
      if (brackets.back() != c) {
        fail(i, "unexpected '" + std::string(1, c) + "', expected '" + std::string(1, brackets.back()) + "'");
      }
      brackets.pop_back();
    }
    emit(TokKind::op, std::string(1, c), i);
    return i + 1;
  }

  // Digits with single underscores between them, from i; returns the end.
  size_t digits(size_t i, bool (*is_digit)(char)) const {
    size_t j = i;
    while (j < src_.size() && is_digit(src_[j])) {
      ++j;
      if (j + 1 < src_.size() && src_[j] == '_' && is_digit(src_[j + 1])) ++j;
    }
    return j;
  }

  size_t number(size_t i) {
    auto dec = [](char ch) { return ch >= '0' && ch <= '9'; };
    auto without_underscores = [](std::string s) {
      s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
      return s;
    };
    if (src_[i] == '0' && i + 1 < src_.size()) {
      const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[i + 1])));
      int base = p == 'x' ? 16 : (p == 'o' ? 8 : (p == 'b' ? 2 : 0));
      if (base != 0) {
        size_t j = i + 2;
        if (j < src_.size() && src_[j] == '_') ++j;
        size_t e = digits(j, base == 16 ? +[](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)) != 0; }
                              : base == 8 ? +[](char ch) { return ch >= '0' && ch <= '7'; }
                                          : +[](char ch) { return ch == '0' || ch == '1'; });
        if (e > j) return integer(i, e, without_underscores(src_.substr(j, e - j)), base);
      }
    }
    size_t j = digits(i, dec);
    bool is_float = false;
    const bool after_dot = !out_.empty() && out_.back().kind == TokKind::op && out_.back().text == ".";
    if (!after_dot) {  // "x.0.1" is two lookups, not a float
      if (j + 1 < src_.size() && src_[j] == '.' && dec(src_[j + 1])) {
        j = digits(j + 1, dec);
        is_float = true;
      }
      if (j < src_.size() && (src_[j] == 'e' || src_[j] == 'E')) {
        size_t k = j + 1;
        if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
        if (k < src_.size() && dec(src_[k])) {
          j = digits(k, dec);
          is_float = true;
        }
      }
    }
    std::string text = without_underscores(src_.substr(i, j - i));
    if (is_float) {
      emit(TokKind::floating, text, i, Value(std::strtod(text.c_str(), nullptr)));
      return j;
    }
    return integer(i, j, text, 10);
  }

  size_t integer(size_t start, size_t end, const std::string& digits_text, int base) {
    int64_t v = 0;
    auto res = std::from_chars(digits_text.data(), digits_text.data() + digits_text.size(), v, base);
    if (res.ec != std::errc() || res.ptr != digits_text.data() + digits_text.size()) {
      fail(start, "integer literal out of range");
    }
    emit(TokKind::integer, src_.substr(start, end - start), start, Value(v));
    return end;
  }

  static int hex_value(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
  }

  // A quoted string with Python's backslash escapes.
  size_t string(size_t i) {
    const char quote = src_[i];
    std::string value;
    size_t j = i + 1;
    while (true) {
      if (j >= src_.size()) fail(i, "unterminated string");
      const char c = src_[j];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++j;
        continue;
      }
      if (j + 1 >= src_.size()) fail(i, "unterminated string");
      const char e = src_[j + 1];
      j += 2;
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case 'a': value += '\a'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'n': value += '\n'; break;
        case 'r': value += '\r'; break;
        case 't': value += '\t'; break;
        case 'v': value += '\v'; break;
        case 'x': case 'u': case 'U': {
          const size_t n = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            int h = j + k < src_.size() ? hex_value(src_[j + k]) : -1;
            if (h < 0) fail(j - 2, std::string("truncated \\") + e + " escape in string");
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail(j - 2, "escape names no valid code point");
          utf8::append(value, cp);
          j += n;
          break;
        }
        case 'N': throw Error(Errc::unsupported, at(pos_of(j - 2), "\\N{...} escapes in strings are not supported"));
        default:
          if (e >= '0' && e <= '7') {  // up to three octal digits
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && j < src_.size() && src_[j] >= '0' && src_[j] <= '7'; ++k, ++j) {
              cp = cp * 8 + static_cast<uint32_t>(src_[j] - '0');
            }
            utf8::append(value, cp);
          } else {  // unknown escapes stay as written
            value += '\\';
            value += e;
          }
      }
    }
    emit(TokKind::string, std::move(value), i);
    return j + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  size_t cursor_off_ = 0;  // pos_of's memo: the position of src_[cursor_off_]
  Pos cursor_pos_;  // the last tag ended a line (or nothing came yet)
};

// Jinja reads templates with universal newlines and, without
// keep_trailing_newline, drops one newline at the very end.
std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> lex(std::string_view source) {
  const size_t bad = utf8::first_invalid(source);
  if (bad != source.size()) {
    throw Error(Errc::invalid_argument, "chat template: invalid UTF-8 at byte " + std::to_string(bad));
  }
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace troupe::jinja
