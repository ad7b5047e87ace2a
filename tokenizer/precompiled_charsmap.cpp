// The Precompiled normalizer of precompiled_charsmap.hpp. The trie is Darts'
// double array: a unit holds a label byte, a leaf flag and the XOR offset to
// its children; a leaf's value unit holds the offset of the replacement.
// Every index is bounds-checked, so a hostile charsmap only matches less.
#include "tokenizer/precompiled_charsmap.hpp"

#include <utf8proc.h>

#include "core/error.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe::hf {
namespace {

bool has_leaf(uint32_t unit) { return ((unit >> 8) & 1) == 1; }
uint32_t value_of(uint32_t unit) { return unit & 0x7FFFFFFFu; }
uint32_t label_of(uint32_t unit) { return unit & (0x80000000u | 0xFFu); }
size_t offset_of(uint32_t unit) { return static_cast<size_t>(unit >> 10) << ((unit & (1u << 9)) >> 6); }

uint32_t read_le32(std::string_view s, size_t pos) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(s[pos + i])) << (8 * i);
  return v;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::optional<std::string> decode_base64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    size_t pad = 0;
    if (last) {
      if (text[i + 3] == '=') ++pad;
      if (pad == 1 && text[i + 2] == '=') ++pad;
    }
    uint32_t bits = 0;
    for (size_t k = 0; k < 4; ++k) {
      const int v = k < 4 - pad ? base64_value(text[i + k]) : 0;
      if (v < 0) return std::nullopt;  // also '=' anywhere but the end
      bits = bits << 6 | static_cast<uint32_t>(v);
    }
    // The bits past the last whole byte must be zero (canonical encoding).
    if ((pad == 1 && (bits & 0xFF) != 0) || (pad == 2 && (bits & 0xFFFF) != 0)) return std::nullopt;
    out += static_cast<char>(bits >> 16);
    if (pad < 2) out += static_cast<char>((bits >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(bits & 0xFF);
  }
  return out;
}

PrecompiledCharsmap::PrecompiledCharsmap(std::string_view blob, const std::string& where) {
  if (blob.size() < 4) {
    throw Error(Errc::bad_format, where + ": charsmap of " + std::to_string(blob.size()) + " bytes has no trie size");
  }
  const uint32_t trie_bytes = read_le32(blob, 0);
  const size_t n_units = trie_bytes / 4;
  if (n_units > (blob.size() - 4) / 4) {
    throw Error(Errc::bad_format, where + ": charsmap is truncated: its trie needs " + std::to_string(trie_bytes) +
                                      " bytes, " + std::to_string(blob.size() - 4) + " follow");
  }
  units_.resize(n_units);
  for (size_t i = 0; i < n_units; ++i) units_[i] = read_le32(blob, 4 + 4 * i);
  normalized_ = std::string(blob.substr(4 + 4 * n_units));
  if (!utf8::is_valid(normalized_)) {
    throw Error(Errc::bad_format, where + ": charsmap's normalized strings are not valid UTF-8 (at byte " +
                                      std::to_string(utf8::first_invalid(normalized_)) + ")");
  }
}

std::optional<std::string_view> PrecompiledCharsmap::transform(std::string_view chunk) const {
  if (units_.empty()) return std::nullopt;
  size_t pos = offset_of(units_[0]);
  for (const char ch : chunk) {
    const auto c = static_cast<uint8_t>(ch);
    if (c == 0) break;  // keys are NUL-terminated
    pos ^= c;
    if (pos >= units_.size()) return std::nullopt;
    const uint32_t unit = units_[pos];
    if (label_of(unit) != c) return std::nullopt;
    pos ^= offset_of(unit);
    if (!has_leaf(unit)) continue;
    // The first (shortest) key found is the one used.
    if (pos >= units_.size()) return std::nullopt;
    const size_t begin = value_of(units_[pos]);
    if (begin > normalized_.size()) return std::nullopt;
    size_t end = normalized_.find('\0', begin);
    if (end == std::string::npos) end = normalized_.size();
    const std::string_view out = std::string_view(normalized_).substr(begin, end - begin);
    // An offset inside a character would split it; Hugging Face would panic.
    if (!utf8::is_valid(out)) return std::nullopt;
    return out;
  }
  return std::nullopt;
}

std::string PrecompiledCharsmap::normalize(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  // One grapheme cluster [begin, end) at a time.
  auto flush = [&](size_t begin, size_t end) {
    const std::string_view cluster = text.substr(begin, end - begin);
    if (cluster.size() < 6) {
      if (const auto r = transform(cluster)) {
        out += *r;
        return;
      }
    }
    for (size_t pos = 0; pos < cluster.size();) {
      const size_t len = utf8::sequence_length(cluster, pos);
      const std::string_view ch = cluster.substr(pos, len == 0 ? 1 : len);
      const auto r = transform(ch);
      out += r ? *r : ch;
      pos += ch.size();
    }
  };
  utf8proc_int32_t state = 0;
  char32_t previous = 0;
  size_t cluster_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8::sequence_length(text, pos);
    if (len == 0) throw Error(Errc::internal, "tokenizer: normalizer input is not valid UTF-8");
    const char32_t cp = utf8::decode_at(text, pos, len);
    if (pos > 0 && utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(previous),
                                                    static_cast<utf8proc_int32_t>(cp), &state)) {
      flush(cluster_start, pos);
      cluster_start = pos;
    }
    previous = cp;
    pos += len;
  }
  if (cluster_start < text.size()) flush(cluster_start, text.size());
  return out;
}

}  // namespace troupe::hf
