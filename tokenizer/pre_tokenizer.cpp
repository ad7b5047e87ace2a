// The pre-tokenizer regexes, run with PCRE2 in UTF + Unicode-property mode.
// Patterns are those the model families publish (GPT-2's encoder.py, Llama 3's
// tiktoken pattern, Qwen2's tokenizer.json, o200k's tiktoken pattern); SmolLM2 first isolates every
// digit (Hugging Face's Digits(individual_digits)) and then applies GPT-2's.
#include "tokenizer/pre_tokenizer.hpp"

#include "core/error.hpp"
#include "tokenizer/regex.hpp"

namespace troupe {

namespace {

// GPT-2 (openai/gpt-2 encoder.py), also Hugging Face's ByteLevel default.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3 (tiktoken cl100k-style, numbers in groups of up to three).
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2 / Qwen3: as Llama 3 but every digit on its own.
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// GPT-4o and gpt-oss (tiktoken's o200k_base): a word splits before an upper-
// case run that follows lower case ("camelCase" is "camel", "Case"), the
// contraction stays with its word, and '/' and line ends join punctuation.
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kDigit = R"(\p{N})";

struct Named {
  std::string_view name;
  std::vector<const char*> steps;
};

const std::vector<Named>& table() {
  static const std::vector<Named> t = {
      {"default", {kGpt2}},   {"gpt-2", {kGpt2}},   {"llama-bpe", {kLlama3}},
      {"llama3", {kLlama3}},  {"qwen2", {kQwen2}},  {"smollm", {kDigit, kGpt2}},
      {"gpt-4o", {kGpt4o}},   {"llama4", {kGpt4o}},
  };
  return t;
}

}  // namespace

std::string_view PreTokenizer::gpt2_pattern() { return kGpt2; }

std::string PreTokenizer::supported_names() {
  std::string names;
  for (const Named& n : table()) {
    if (!names.empty()) names += ", ";
    names += n.name;
  }
  return names;
}

PreTokenizer::PreTokenizer(std::string_view name) {
  if (name.empty()) name = "default";
  for (const Named& n : table()) {
    if (n.name != name) continue;
    for (const char* pattern : n.steps) {
      steps_.push_back(std::make_unique<Regex>(pattern, "tokenizer: pre-tokenizer '" + std::string(name) + "'",
                                               Errc::internal));
    }
    return;
  }
  throw Error(Errc::unsupported, "tokenizer pre-tokenizer '" + std::string(name) +
                                     "' is not supported; supported: " + supported_names());
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& step : steps_) {
    next.clear();
    for (const std::string_view piece : pieces) step->split(piece, next);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace troupe
