// JSON's lexical pieces as rules (RFC 8259), each made once per grammar.
#include "grammar/json_rules.hpp"

#include <string>

#include "core/error.hpp"

namespace troupe::grammar {
namespace {

ByteSet set_of(std::string_view chars) {
  ByteSet s;
  for (char c : chars) s.add(static_cast<uint8_t>(c));
  return s;
}

Symbol digit() { return Grammar::range('0', '9'); }

// 10^n for n <= 19 (the largest that fits uint64).
uint64_t pow10(size_t n) {
  uint64_t p = 1;
  for (size_t i = 0; i < n; ++i) p *= 10;
  return p;
}

}  // namespace

int32_t JsonRules::ws() {
  // "" | " " | "\n" followed by an indent: one line break a gap, so a
  // model that likes newlines cannot fill its budget with them, yet
  // pretty-printed output fits.
  if (ws_ < 0) {
    const Symbol indent = g_.rep({Grammar::bytes(set_of(" \t"))}, 0, kMaxIndent, "indent");
    ws_ = g_.add("ws", {{}, Grammar::literal(" "), {Grammar::byte('\n'), indent}});
  }
  return ws_;
}

int32_t JsonRules::char_rule() {
  if (char_ >= 0) return char_;
  ByteSet plain;
  plain.add_range(0x20, 0x7F);
  ByteSet quote_backslash = set_of("\"\\");
  for (size_t i = 0; i < 4; ++i) plain.bits[i] &= ~quote_backslash.bits[i];
  const Symbol cont = Grammar::range(0x80, 0xBF);
  ByteSet hex;
  hex.add_range('0', '9');
  hex.add_range('a', 'f');
  hex.add_range('A', 'F');
  const Symbol h = Grammar::bytes(hex);
  char_ = g_.add("char", {
                             {Grammar::bytes(plain)},
                             {Grammar::range(0xC2, 0xDF), cont},
                             {Grammar::range(0xE0, 0xEF), cont, cont},
                             {Grammar::range(0xF0, 0xF4), cont, cont, cont},
                             {Grammar::byte('\\'), Grammar::bytes(set_of("\"\\/bfnrt"))},
                             {Grammar::byte('\\'), Grammar::byte('u'), h, h, h, h},
                         });
  return char_;
}

int32_t JsonRules::string() {
  if (string_ < 0) string_ = string(0, -1);
  return string_;
}

int32_t JsonRules::string(int32_t min_chars, int32_t max_chars) {
  const Symbol body = g_.rep({Grammar::ref(char_rule())}, min_chars, max_chars, "chars");
  return g_.add("string", {{Grammar::byte('"'), body, Grammar::byte('"')}});
}

int32_t JsonRules::number() {
  if (number_ >= 0) return number_;
  const Symbol magnitude = Grammar::ref(non_negative_number());
  number_ = g_.add("number", {{Grammar::byte('-'), magnitude}, {magnitude}});
  return number_;
}

int32_t JsonRules::non_negative_number() {
  if (nonneg_number_ >= 0) return nonneg_number_;
  const Symbol int_part = Grammar::ref(
      g_.add("int-part", {Grammar::literal("0"),
                          {Grammar::range('1', '9'), g_.rep({digit()}, 0, kMaxIntDigits - 1, "digits")}}));
  const Symbol frac = g_.rep({Grammar::byte('.'), g_.rep({digit()}, 1, -1, "frac-digits")}, 0, 1, "frac");
  const Symbol exp = g_.rep({Grammar::bytes(set_of("eE")), g_.rep({Grammar::bytes(set_of("+-"))}, 0, 1, "sign"),
                             g_.rep({digit()}, 1, 3, "exp-digits")},
                            0, 1, "exp");
  nonneg_number_ = g_.add("non-negative-number", {{int_part, frac, exp}});
  return nonneg_number_;
}

int32_t JsonRules::integer() {
  if (integer_ < 0) integer_ = integer_range(std::nullopt, std::nullopt);
  return integer_;
}

int32_t JsonRules::digits_between(const std::string& lo, const std::string& hi) {
  // Decimal strings of lo's length between lo and hi: a common first digit
  // recurses; otherwise lo's first digit with the rest >= lo's, the digits
  // strictly between with any rest, and hi's first digit with the rest <= hi's.
  const size_t n = lo.size();
  if (lo == hi) return g_.add("digits", {Grammar::literal(lo)});
  if (lo.find_first_not_of('0') == std::string::npos && hi.find_first_not_of('9') == std::string::npos) {
    return g_.rep({digit()}, static_cast<int32_t>(n), static_cast<int32_t>(n), "digits").rule;
  }
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) {
    return g_.add("digits", {{Grammar::byte(static_cast<uint8_t>(lo[0])), Grammar::ref(digits_between(lo_rest, hi_rest))}});
  }
  std::vector<Alternative> alts;
  alts.push_back({Grammar::byte(static_cast<uint8_t>(lo[0])),
                  Grammar::ref(digits_between(lo_rest, std::string(n - 1, '9')))});
  if (hi[0] - lo[0] > 1) {
    Alternative mid{Grammar::range(static_cast<uint8_t>(lo[0] + 1), static_cast<uint8_t>(hi[0] - 1))};
    if (n > 1) mid.push_back(g_.rep({digit()}, static_cast<int32_t>(n - 1), static_cast<int32_t>(n - 1), "digits"));
    alts.push_back(std::move(mid));
  }
  alts.push_back({Grammar::byte(static_cast<uint8_t>(hi[0])),
                  Grammar::ref(digits_between(std::string(n - 1, '0'), hi_rest))});
  for (Alternative& a : alts) {
    // An empty rest (n == 1) was made a rule deriving ""; drop it.
    if (n == 1 && a.size() == 2 && a[1].rule >= 0) a.pop_back();
  }
  return g_.add("digits", std::move(alts));
}

int32_t JsonRules::magnitude(uint64_t lo, std::optional<uint64_t> hi) {
  // Split by length: every length from lo's to hi's (or the int64 width),
  // each a range of same-length strings without a leading zero.
  const size_t lo_len = std::to_string(lo).size();
  const size_t hi_len = hi ? std::to_string(*hi).size() : std::max<size_t>(lo_len, kMaxIntDigits);
  std::vector<Alternative> alts;
  for (size_t len = lo_len; len <= hi_len; ++len) {
    const uint64_t a = len == lo_len ? lo : pow10(len - 1);
    const uint64_t b = hi && len == hi_len ? *hi : (len >= 20 ? UINT64_MAX : pow10(len) - 1);
    if (a > b) continue;
    alts.push_back({Grammar::ref(digits_between(std::to_string(a), std::to_string(b)))});
  }
  return g_.add("magnitude", std::move(alts));
}

int32_t JsonRules::integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) {
    throw Error(Errc::invalid_argument, "no integer lies between minimum " + std::to_string(*lo) + " and maximum " +
                                            std::to_string(*hi));
  }
  // |n| as uint64 without overflow at INT64_MIN.
  auto abs_u = [](int64_t v) { return v < 0 ? uint64_t(-(v + 1)) + 1 : uint64_t(v); };
  std::vector<Alternative> alts;
  if (!hi || *hi >= 0) {
    const uint64_t from = lo && *lo > 0 ? uint64_t(*lo) : 0;
    alts.push_back({Grammar::ref(magnitude(from, hi ? std::optional<uint64_t>(uint64_t(*hi)) : std::nullopt))});
  }
  if (!lo || *lo < 0) {
    const uint64_t from = hi && *hi < 0 ? abs_u(*hi) : 1;
    const std::optional<uint64_t> to = lo ? std::optional<uint64_t>(abs_u(*lo)) : std::nullopt;
    alts.push_back({Grammar::byte('-'), Grammar::ref(magnitude(from, to))});
  }
  // "-0" is JSON's other spelling of zero.
  if ((!lo || *lo <= 0) && (!hi || *hi >= 0)) alts.push_back(Grammar::literal("-0"));
  return g_.add("integer", std::move(alts));
}

int32_t JsonRules::boolean() {
  if (boolean_ < 0) boolean_ = g_.add("boolean", {Grammar::literal("true"), Grammar::literal("false")});
  return boolean_;
}

int32_t JsonRules::null() {
  if (null_ < 0) null_ = g_.add("null", {Grammar::literal("null")});
  return null_;
}

int32_t JsonRules::array_of(int32_t item, int32_t min_items, int32_t max_items, const std::string& name) {
  const Symbol w = Grammar::ref(ws());
  const Alternative first{Grammar::ref(item), w};
  const Alternative rest{Grammar::byte(','), w, Grammar::ref(item), w};
  const Alternative open{Grammar::byte('['), w};
  if (max_items == 0) {
    Alternative empty = open;
    empty.push_back(Grammar::byte(']'));
    return g_.add(name, {std::move(empty)});
  }
  Alternative full = open;
  full.insert(full.end(), first.begin(), first.end());
  full.push_back(g_.rep(rest, std::max(0, min_items - 1), max_items < 0 ? -1 : max_items - 1, name + "-items"));
  full.push_back(Grammar::byte(']'));
  std::vector<Alternative> alts{std::move(full)};
  if (min_items == 0) {
    Alternative empty = open;
    empty.push_back(Grammar::byte(']'));
    alts.push_back(std::move(empty));
  }
  return g_.add(name, std::move(alts));
}

int32_t JsonRules::object_rule() {
  // "{" ws ( kv ( "," ws kv )* )? "}" with kv ::= string ws ":" ws value ws.
  const Symbol w = Grammar::ref(ws());
  const int32_t kv = g_.add("member", {{Grammar::ref(string()), w, Grammar::byte(':'), w, Grammar::ref(value()), w}});
  const Symbol more = g_.rep({Grammar::byte(','), w, Grammar::ref(kv)}, 0, -1, "members");
  g_.define(object_, {{Grammar::byte('{'), w, Grammar::ref(kv), more, Grammar::byte('}')},
                      {Grammar::byte('{'), w, Grammar::byte('}')}});
  return object_;
}

int32_t JsonRules::value() {
  if (value_ >= 0) return value_;
  // value, object and array refer to each other: declared first.
  value_ = g_.declare("value");
  object_ = g_.declare("object");
  array_ = g_.declare("array");
  object_rule();
  const Symbol w = Grammar::ref(ws());
  const Symbol more = g_.rep({Grammar::byte(','), w, Grammar::ref(value_), w}, 0, -1, "elements");
  g_.define(array_, {{Grammar::byte('['), w, Grammar::ref(value_), w, more, Grammar::byte(']')},
                     {Grammar::byte('['), w, Grammar::byte(']')}});
  g_.define(value_, {{Grammar::ref(object_)},
                     {Grammar::ref(array_)},
                     {Grammar::ref(string())},
                     {Grammar::ref(number())},
                     {Grammar::ref(boolean())},
                     {Grammar::ref(null())}});
  return value_;
}

int32_t JsonRules::any_object() {
  value();
  return object_;
}

int32_t JsonRules::any_array() {
  value();
  return array_;
}

int32_t JsonRules::document(int32_t value) {
  const Symbol w = Grammar::ref(ws());
  return g_.add("document", {{w, Grammar::ref(value), w}});
}

}  // namespace troupe::grammar
