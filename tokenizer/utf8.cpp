// UTF-8 validation and lossy repair (see utf8.hpp). The well-formed byte
// ranges are those of the Unicode Standard, table 3-7: no overlong forms, no
// surrogates, nothing above U+10FFFF.
#include "tokenizer/utf8.hpp"

#include <cstdint>

namespace troupe::utf8 {
namespace {

enum class Scan { valid, invalid, incomplete };

struct ScanResult {
  Scan status;
  size_t len;  // valid: the sequence; invalid: the maximal subpart; incomplete: the bytes present
};

ScanResult scan(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {Scan::valid, 1};
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // keeps out the UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {Scan::invalid, 1};  // a continuation byte, C0/C1 or F5..FF
  }
  for (size_t k = 1; k < need; ++k) {
    if (pos + k >= s.size()) return {Scan::incomplete, k};
    const auto b = static_cast<uint8_t>(s[pos + k]);
    const uint8_t min = k == 1 ? lo : uint8_t{0x80};
    const uint8_t max = k == 1 ? hi : uint8_t{0xBF};
    if (b < min || b > max) return {Scan::invalid, k};
  }
  return {Scan::valid, need};
}

}  // namespace

size_t sequence_length(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  const ScanResult r = scan(s, pos);
  return r.status == Scan::valid ? r.len : 0;
}

char32_t decode_at(std::string_view s, size_t pos, size_t len) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (len == 1) return b0;
  char32_t cp = b0 & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[pos + k]) & 0x3F);
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t first_invalid(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    const ScanResult r = scan(s, pos);
    if (r.status != Scan::valid) return pos;
    pos += r.len;
  }
  return s.size();
}

size_t append_lossy(std::string& out, std::string_view bytes, bool at_end) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const ScanResult r = scan(bytes, pos);
    if (r.status == Scan::valid) {
      out.append(bytes.substr(pos, r.len));
    } else if (r.status == Scan::invalid || at_end) {
      out.append(kReplacement);
    } else {
      break;  // may complete with the next bytes
    }
    pos += r.len;
  }
  return pos;
}

}  // namespace troupe::utf8
