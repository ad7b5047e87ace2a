// Byte-level BPE pre-tokenizers: the regex splits that cut text into the
// pieces BPE merges within, chosen by GGUF's tokenizer.ggml.pre name. Each
// step splits every piece of the previous step, keeping matches and the text
// between them as pieces ("isolated", as Hugging Face's Split does).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

class Regex;  // a compiled PCRE2 pattern (pre_tokenizer.cpp)

class PreTokenizer {
 public:
  // Throws Error(unsupported) naming the supported names for an unknown one.
  // An empty name means "default".
  explicit PreTokenizer(std::string_view name);
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // The pieces of text, in order; together they are exactly text. text must
  // be valid UTF-8.
  std::vector<std::string_view> split(std::string_view text) const;

  // "default, gpt-2, llama-bpe, llama3, qwen2, smollm"
  static std::string supported_names();
  // GPT-2's split (openai/gpt-2 encoder.py), also Hugging Face's ByteLevel
  // pre-tokenizer regex.
  static std::string_view gpt2_pattern();

 private:
  std::vector<std::unique_ptr<Regex>> steps_;
};

}  // namespace troupe
