// Builds GPT-2's bytes_to_unicode table: the printable ranges '!'..'~',
// '¡'..'¬' and '®'..'ÿ' map to themselves, the other 68 bytes to U+0100
// onwards in byte order.
#include "tokenizer/byte_level.hpp"

#include <cstddef>

namespace troupe::byte_level {
namespace {

bool self_printable(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};  // every stand-in is below U+0144

  Tables() {
    to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const char32_t cp = self_printable(b) ? static_cast<char32_t>(b) : next++;
      to_char[static_cast<size_t>(b)] = cp;
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::array<char32_t, 256>& byte_to_char() { return tables().to_char; }

int char_to_byte(char32_t cp) {
  const auto& t = tables().to_byte;
  return cp < t.size() ? t[cp] : -1;
}

}  // namespace troupe::byte_level
