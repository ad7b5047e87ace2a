// Python str operations over UTF-8 (see jinja_text.hpp). Whitespace-based
// operations work on code points; search-based ones on bytes, which is exact
// for valid UTF-8 because no code point's encoding starts inside another's.
#include "tokenizer/jinja_text.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tokenizer/utf8.hpp"

namespace troupe::jinja::text {

std::u32string decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = utf8::sequence_length(s, pos);
    if (len == 0) {  // callers pass valid UTF-8; keep going rather than loop
      out.push_back(0xFFFD);
      ++pos;
      continue;
    }
    out.push_back(utf8::decode_at(s, pos, len));
    pos += len;
  }
  return out;
}

std::string encode(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) utf8::append(out, c);
  return out;
}

size_t length(std::string_view s) {
  size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;  // count lead bytes
  }
  return n;
}

bool is_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  switch (c) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  std::u32string cps = decode(s);
  std::u32string set = chars ? decode(*chars) : std::u32string();
  auto drop = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && drop(cps[b])) ++b;
  }
  if (right) {
    while (e > b && drop(cps[e - 1])) --e;
  }
  return encode(std::u32string_view(cps).substr(b, e - b));
}

namespace {

std::vector<std::string> split_whitespace(std::string_view s, int64_t max_split) {
  std::u32string cps = decode(s);
  std::vector<std::string> out;
  size_t i = 0;
  const size_t n = cps.size();
  while (true) {
    while (i < n && is_space(cps[i])) ++i;
    if (i == n) break;
    if (max_split >= 0 && static_cast<int64_t>(out.size()) == max_split) {
      out.push_back(encode(std::u32string_view(cps).substr(i)));  // the rest, as is
      break;
    }
    size_t j = i;
    while (j < n && !is_space(cps[j])) ++j;
    out.push_back(encode(std::u32string_view(cps).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> rsplit_whitespace(std::string_view s, int64_t max_split) {
  std::u32string cps = decode(s);
  std::vector<std::string> out;
  size_t e = cps.size();
  while (true) {
    while (e > 0 && is_space(cps[e - 1])) --e;
    if (e == 0) break;
    if (max_split >= 0 && static_cast<int64_t>(out.size()) == max_split) {
      out.push_back(encode(std::u32string_view(cps).substr(0, e)));
      break;
    }
    size_t b = e;
    while (b > 0 && !is_space(cps[b - 1])) --b;
    out.push_back(encode(std::u32string_view(cps).substr(b, e - b)));
    e = b;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t max_split) {
  if (!sep) return split_whitespace(s, max_split);
  std::vector<std::string> out;
  size_t start = 0;
  while (max_split < 0 || static_cast<int64_t>(out.size()) < max_split) {
    size_t at = s.find(*sep, start);
    if (at == std::string_view::npos) break;
    out.emplace_back(s.substr(start, at - start));
    start = at + sep->size();
  }
  out.emplace_back(s.substr(start));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t max_split) {
  if (!sep) return rsplit_whitespace(s, max_split);
  std::vector<std::string> out;
  size_t end = s.size();
  while (max_split < 0 || static_cast<int64_t>(out.size()) < max_split) {
    if (end < sep->size()) break;
    size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string_view::npos) break;
    out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  out.emplace_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<std::string> splitlines(std::string_view s) {
  std::u32string cps = decode(s);
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
  };
  while (i < cps.size()) {
    if (!is_break(cps[i])) {
      ++i;
      continue;
    }
    out.push_back(encode(std::u32string_view(cps).substr(start, i - start)));
    i += (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ? 2 : 1;
    start = i;
  }
  if (start < cps.size()) out.push_back(encode(std::u32string_view(cps).substr(start)));
  return out;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (from.empty()) {
    // Python inserts `to` before every code point and at the end.
    std::u32string cps = decode(s);
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      utf8::append(out, c);
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(from, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(to);
    start = at + from.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

namespace {

template <typename Map>
std::string map_code_points(std::string_view s, Map map) {
  std::u32string cps = decode(s);
  for (char32_t& c : cps) c = map(c);
  return encode(cps);
}

char32_t to_upper(char32_t c) {
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c)));
}
char32_t to_lower(char32_t c) {
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

}  // namespace

std::string upper(std::string_view s) { return map_code_points(s, to_upper); }
std::string lower(std::string_view s) { return map_code_points(s, to_lower); }

std::string capitalize(std::string_view s) {
  std::u32string cps = decode(s);
  for (size_t i = 0; i < cps.size(); ++i) {
    // Python 3.8+ title-cases the first character ("ǆ" -> "ǅ", not "Ǆ").
    cps[i] = i == 0 ? static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cps[i]))) : to_lower(cps[i]);
  }
  return encode(cps);
}

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (!is_printable(c)) {
      char buf[16];
      if (c < 0x100) {
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      utf8::append(out, c);
    }
  }
  out += quote;
  return out;
}

std::optional<double> parse_float(const std::string& raw) {
  const std::string s = strip(raw, std::nullopt, true, true);
  const std::string lowered = lower(s);
  const std::string body = !lowered.empty() && (lowered[0] == '+' || lowered[0] == '-') ? lowered.substr(1) : lowered;
  if (body == "inf" || body == "infinity" || body == "nan") return std::strtod(lowered.c_str(), nullptr);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool digit = c >= '0' && c <= '9';
    if (c == '_') {
      const bool between_digits = i > 0 && i + 1 < s.size() && s[i - 1] >= '0' && s[i - 1] <= '9' &&
                                  s[i + 1] >= '0' && s[i + 1] <= '9';
      if (!between_digits) return std::nullopt;
      continue;
    }
    if (!digit && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-') return std::nullopt;
    clean += c;
  }
  if (clean.find_first_of("0123456789") == std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

std::optional<int64_t> parse_int(const std::string& raw, int64_t base) {
  std::string s = lower(strip(raw, std::nullopt, true, true));
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.erase(0, 1);
  }
  const bool prefixed = s.size() > 2 && s[0] == '0' &&
                        ((base == 16 && s[1] == 'x') || (base == 8 && s[1] == 'o') || (base == 2 && s[1] == 'b'));
  if (prefixed) {
    s.erase(0, 2);
    if (!s.empty() && s[0] == '_') s.erase(0, 1);
  }
  if (s.empty() || s.front() == '_' || s.back() == '_' || s.find("__") != std::string::npos) return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c == '_') continue;
    const int d = c >= '0' && c <= '9' ? c - '0' : (c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99);
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return std::nullopt;
  }
  return negative ? -v : v;
}

std::string cat(std::initializer_list<std::string_view> parts) {
  size_t n = 0;
  for (std::string_view p : parts) n += p.size();
  std::string out;
  out.reserve(n);
  for (std::string_view p : parts) out.append(p);
  return out;
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  // Shortest round-trip digits from to_chars, laid out as Python's repr does.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') {
    out += '-';
    i = 1;
  }
  const size_t e_at = sci.find('e');
  std::string digits;
  for (size_t k = i; k < e_at; ++k) {
    if (sci[k] != '.') digits += sci[k];
  }
  const int exp10 = std::stoi(sci.substr(e_at + 1));
  const int decpt = exp10 + 1;  // digits are d.ddd * 10^exp10
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += text::cat({"0.", std::string(static_cast<size_t>(-decpt), '0'), digits});
    } else if (decpt >= n) {
      out += digits + std::string(static_cast<size_t>(decpt - n), '0') + ".0";
    } else {
      out += text::cat({std::string_view(digits).substr(0, static_cast<size_t>(decpt)), ".",
                        std::string_view(digits).substr(static_cast<size_t>(decpt))});
    }
    return out;
  }
  out += digits[0];
  if (n > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
  return out + ebuf;
}

}  // namespace troupe::jinja::text
