// Small string helpers shared by the tokenizers: literal replacement (used by
// SentencePiece's space escaping and by tokenizer.json's Replace steps) and
// the "<0xNN>" byte-fallback pieces.
#pragma once

#include <string>
#include <string_view>

namespace troupe {

// Every occurrence of `from` replaced by `to`, left to right; an empty `from`
// leaves s unchanged.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to);

// The byte a "<0xNN>" piece stands for (either hex case), or -1.
int parse_byte_piece(std::string_view t);

}  // namespace troupe
