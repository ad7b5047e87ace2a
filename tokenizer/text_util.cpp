// String helpers shared by the tokenizers.
#include "tokenizer/text_util.hpp"

namespace troupe {

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(s);
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

int parse_byte_piece(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = t[i];
    v *= 16;
    if (c >= '0' && c <= '9') {
      v += c - '0';
    } else if (c >= 'A' && c <= 'F') {
      v += c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      v += c - 'a' + 10;
    } else {
      return -1;
    }
  }
  return v;
}

}  // namespace troupe
