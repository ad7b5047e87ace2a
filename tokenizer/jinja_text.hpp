// Python str semantics over UTF-8 for the chat-template interpreter: strings
// are indexed, sliced and measured in code points, and strip/split/case use
// Python's notion of whitespace, so templates render as transformers does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::jinja::text {

// Code points of valid UTF-8 (the interpreter checks its inputs first).
std::u32string decode(std::string_view s);
std::string encode(std::u32string_view cps);
size_t length(std::string_view s);

// Python's str.isspace() for one code point (also what `\s` matches).
bool is_space(char32_t c);

// str.strip/lstrip/rstrip: chars == nullopt strips whitespace, else any of
// the code points in *chars.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);

// str.split / str.rsplit. sep == nullopt splits on whitespace runs and drops
// empty parts; max_split < 0 means no limit. An empty sep is the caller's error.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t max_split);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t max_split);

// str.splitlines() without keepends: \n, \r\n, \r, \v, \f, \x1c-\x1e, \x85,
// U+2028 and U+2029 end lines.
std::vector<std::string> splitlines(std::string_view s);

// str.replace(old, new, count); count < 0 replaces all. An empty `from`
// inserts `to` between code points, as Python does.
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);

// Simple (one-to-one) Unicode case mapping. Python's str.upper() also applies
// the few one-to-many special cases (German sharp s -> "SS"); those are not
// mapped here.
std::string upper(std::string_view s);
std::string lower(std::string_view s);
// First code point title-cased, the rest lower-cased (str.capitalize and
// Jinja's capitalize filter).
std::string capitalize(std::string_view s);
bool is_printable(char32_t c);

// Python repr() of a str: single quotes unless the text holds ' and no ",
// backslash escapes for the quote, \\, \t, \n, \r and unprintable code points.
std::string repr(std::string_view s);

// Python's float(str): optional sign, digits with single underscores, a
// fraction, an exponent, or inf/nan; surrounding whitespace allowed.
std::optional<double> parse_float(const std::string& s);
// Python's int(str, base) for bases 2..36, with the 0x/0o/0b prefix its base
// allows; nullopt also when the value does not fit in 64 bits.
std::optional<int64_t> parse_int(const std::string& s, int64_t base);

// Concatenation by appending: GCC 12 reports a false -Wrestrict on
// `"literal" + std::string` (it inserts at position 0), so build strings this way.
std::string cat(std::initializer_list<std::string_view> parts);

// Python repr() of a float: the shortest text that reads back to the same
// double, in fixed notation for exponents -5..15 and with a ".0" on whole
// numbers ("1.0", "0.0001", "1e-05", "1e+16", "inf", "nan").
std::string float_repr(double v);

}  // namespace troupe::jinja::text
