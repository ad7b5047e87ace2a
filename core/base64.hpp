// RFC 4648 base64 (with padding): OpenAI's base64 embedding vectors,
// tokenizer.json's precompiled_charsmap written from a GGUF's bytes, and the
// images clients send in data: URLs.
#pragma once

#include <string>
#include <string_view>

namespace troupe {

std::string base64_encode(std::string_view bytes);

// The bytes of a base64 text. Padding may be left out (as some clients
// do), and whitespace (line breaks of MIME-wrapped text) is skipped; any
// other character outside the alphabet, or a length no encoder writes,
// throws Error(invalid_argument) saying where.
std::string base64_decode(std::string_view text);

}  // namespace troupe
