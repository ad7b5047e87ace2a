// Reads a GGUF file's tokenizer.ggml.* keys into the plain VocabData the
// tokenizer is built from (tokenizer/ knows nothing of GGUF).
#pragma once

#include "model/gguf.hpp"
#include "tokenizer/vocab.hpp"

namespace troupe {

// Throws Error(bad_format) naming the file and key when a required key is
// missing, has the wrong type, or names a token id outside the vocabulary.
// The id 0xFFFFFFFF, llama.cpp's "none", reads as -1. Absent flags take
// llama.cpp's defaults: "llama" vocabs add BOS and a space prefix, others not.
VocabData vocab_from_gguf(const gguf::GgufFile& file);

}  // namespace troupe
