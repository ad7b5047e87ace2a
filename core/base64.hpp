// RFC 4648 base64 (with padding): OpenAI's base64 embedding vectors, and
// tokenizer.json's precompiled_charsmap written from a GGUF's bytes.
#pragma once

#include <string>
#include <string_view>

namespace troupe {

std::string base64_encode(std::string_view bytes);

}  // namespace troupe
