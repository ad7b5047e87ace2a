// GPT-2's byte-level alphabet: every byte gets a printable stand-in character
// (space -> "Ġ" U+0120, newline -> "Ċ" U+010A), so a byte-level BPE vocab is
// plain text. Bytes that are already printable Latin-1 stand for themselves.
#pragma once

#include <array>
#include <cstdint>

namespace troupe::byte_level {

// [256] the stand-in code point of each byte.
const std::array<char32_t, 256>& byte_to_char();

// The byte a stand-in code point represents, or -1 if cp is not in the alphabet.
int char_to_byte(char32_t cp);

}  // namespace troupe::byte_level
