// POST /v1/embeddings as OpenAI's API (and vLLM's extras) define it: the
// inputs (text or token ids, one or a batch), the vector encoding, and the
// dimensions to keep.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::net {

struct EmbeddingsRequest {
  std::string model;  // empty: not given
  // The inputs, as text or as token ids (exactly one of the two is non-empty).
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> token_lists;
  bool base64 = false;             // encoding_format "base64": little-endian float32 bytes
  int32_t dimensions = 0;          // keep the first N (Matryoshka models); 0: all
  int8_t normalize = -1;           // vLLM's `normalize`: -1 as the model declares
  bool add_special_tokens = true;  // vLLM's: BOS/EOS as the tokenizer adds them
  int32_t truncate = 0;            // vLLM's truncate_prompt_tokens (EmbedParams::truncate)

  size_t size() const { return texts.empty() ? token_lists.size() : texts.size(); }
};

// Throws ApiError(400) naming the field at fault.
EmbeddingsRequest parse_embeddings_request(std::string_view body, int32_t max_inputs);

}  // namespace troupe::net
