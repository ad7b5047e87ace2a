// The pre-tokenizer regexes, run with PCRE2 in UTF + Unicode-property mode.
// Patterns are those the model families publish (GPT-2's encoder.py, Llama 3's
// tiktoken pattern, Qwen2's tokenizer.json, o200k's tiktoken pattern, Mistral's
// tekken); the families whose tokenizer.json isolates every digit first
// (SmolLM2, StarCoder, Granite's refact, Command-R: Hugging Face's
// Digits(individual_digits)) then apply GPT-2's. The GGUF names are llama.cpp's
// (tokenizer.ggml.pre), each mapped to the pattern its vocabulary was trained
// with; transformers' GGUF loader maps the same names the same way.
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
// Seed-Coder's tokenizer.json: as Llama 3 but every digit on its own and no
// line break joining a run of punctuation.
constexpr const char* kSeedCoder =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
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
// Mistral's tekken (Mistral NeMo, Small 3, Pixtral's text): o200k's word
// rule without the contractions, and every digit on its own.
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: Qwen2's with combining marks kept inside words.
constexpr const char* kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*)"
    R"(|\s*[\r\n]+|\s+(?!\S)|\s+)";
// DeepSeek-V3 and R1 (their tokenizer.json, three splits in turn): digits
// in threes, runs of CJK and kana, then words with marks, punctuation runs,
// line ends and spaces.
constexpr const char* kDeepseekV3Digits = R"(\p{N}{1,3})";
constexpr const char* kDeepseekV3Cjk = R"([一-龥぀-ゟ゠-ヿ]+)";
constexpr const char* kDeepseekV3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)"
    R"(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kDigit = R"(\p{N})";

struct Named {
  std::string_view name;
  std::vector<const char*> steps;
};

const std::vector<Named>& table() {
  static const std::vector<Named> t = {
      // GPT-2's byte-level split (also Phi-2, OLMo 1, MPT, RoBERTa, EXAONE 4).
      {"default", {kGpt2}},
      {"gpt-2", {kGpt2}},
      {"phi-2", {kGpt2}},
      {"olmo", {kGpt2}},
      {"mpt", {kGpt2}},
      {"roberta-bpe", {kGpt2}},
      {"exaone4", {kGpt2}},
      // Llama 3's (also Falcon 3, the cl100k vocabularies llama.cpp calls dbrx, LFM2).
      {"llama-bpe", {kLlama3}},
      {"llama3", {kLlama3}},
      {"llama-v3", {kLlama3}},
      {"falcon3", {kLlama3}},
      {"falcon-h1", {kLlama3}},
      {"pixtral", {kLlama3}},
      {"midm-2.0", {kLlama3}},
      {"lfm2", {kLlama3}},
      {"dbrx", {kLlama3}},
      {"smaug-bpe", {kLlama3}},
      {"jina-v5-nano", {kLlama3}},
      {"glm4", {kLlama3}},  // GLM-4-0414's tokenizer.json splits as Llama 3 does
      {"chatglm-bpe", {kLlama3}},
      // Qwen2's (also DeepSeek-R1's Qwen distills).
      {"qwen2", {kQwen2}},
      {"deepseek-r1-qwen", {kQwen2}},
      {"megrez", {kQwen2}},
      {"kormo", {kQwen2}},
      {"f2llmv2", {kQwen2}},
      {"hunyuan", {kQwen2}},  // Hunyuan-A13B (llama.cpp groups Solar Open's with it)
      {"solar-open", {kQwen2}},
      {"qwen35", {kQwen35}},
      {"tekken", {kTekken}},
      {"seed-coder", {kSeedCoder}},
      {"gpt-4o", {kGpt4o}},
      {"llama4", {kGpt4o}},
      {"minimax-m2", {kGpt4o}},
      {"kanana2", {kGpt4o}},
      {"talkie", {kGpt4o}},
      {"deepseek-v3", {kDeepseekV3Digits, kDeepseekV3Cjk, kDeepseekV3Words}},
      // Hunyuan's dense models split as DeepSeek-V3 does (llama.cpp's
      // HUNYUAN_DENSE regexes, shared by JoyAI and HY V4).
      {"hunyuan-dense", {kDeepseekV3Digits, kDeepseekV3Cjk, kDeepseekV3Words}},
      {"joyai-llm", {kDeepseekV3Digits, kDeepseekV3Cjk, kDeepseekV3Words}},
      {"hy_v4", {kDeepseekV3Digits, kDeepseekV3Cjk, kDeepseekV3Words}},
      // Every digit apart, then GPT-2's.
      {"smollm", {kDigit, kGpt2}},
      {"starcoder", {kDigit, kGpt2}},
      {"refact", {kDigit, kGpt2}},
      {"command-r", {kDigit, kGpt2}},
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
