// UTF-8 helpers shared by the tokenizers and the incremental decoder: code
// point iteration, validation, and lossy repair that replaces each maximal
// invalid subpart with U+FFFD (the Unicode-recommended practice, which Python's
// errors="replace" and Rust's from_utf8_lossy also follow).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace troupe::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the well-formed sequence starting at s[pos], or 0 if the bytes
// there are not a complete, well-formed UTF-8 sequence.
size_t sequence_length(std::string_view s, size_t pos);

// Decodes the well-formed sequence at s[pos] (sequence_length(s, pos) > 0).
char32_t decode_at(std::string_view s, size_t pos, size_t len);

void append(std::string& out, char32_t cp);

// Offset of the first byte that is not part of a well-formed sequence, or
// s.size() when the whole string is valid UTF-8.
size_t first_invalid(std::string_view s);
inline bool is_valid(std::string_view s) { return first_invalid(s) == s.size(); }

// Appends bytes to out with invalid subparts replaced by U+FFFD. When
// at_end is false, a trailing sequence that is incomplete but could still
// become valid is left unconsumed. Returns the number of bytes consumed.
size_t append_lossy(std::string& out, std::string_view bytes, bool at_end);

inline std::string to_valid(std::string_view bytes) {
  std::string out;
  append_lossy(out, bytes, true);
  return out;
}

}  // namespace troupe::utf8
