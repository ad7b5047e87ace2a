// The pre-tokenizer regexes, run with PCRE2 in UTF + Unicode-property mode.
// Patterns are those the model families publish (GPT-2's encoder.py, Llama 3's
// tiktoken pattern, Qwen2's tokenizer.json); SmolLM2 first isolates every
// digit (Hugging Face's Digits(individual_digits)) and then applies GPT-2's.
#include "tokenizer/pre_tokenizer.hpp"

#include <pcre2.h>

#include <array>

#include "core/error.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe {

class Regex {
 public:
  explicit Regex(const char* pattern) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
    if (code_ == nullptr) {
      std::array<PCRE2_UCHAR, 256> msg{};
      pcre2_get_error_message(err, msg.data(), msg.size());
      throw Error(Errc::internal, std::string("tokenizer: pre-tokenizer regex does not compile at offset ") +
                                      std::to_string(offset) + ": " + reinterpret_cast<const char*>(msg.data()));
    }
    // JIT is an optimisation only; the interpreter gives the same matches.
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the isolated split of piece to out.
  void split(std::string_view piece, pcre2_match_data* md, std::vector<std::string_view>& out) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t pos = 0;
    size_t last = 0;  // end of the previous match
    while (pos < piece.size()) {
      // The text was validated once up front; pieces split at match
      // boundaries stay valid.
      const int rc = pcre2_match(code_, subject, piece.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        std::array<PCRE2_UCHAR, 256> msg{};
        pcre2_get_error_message(rc, msg.data(), msg.size());
        throw Error(Errc::internal, std::string("tokenizer: pre-tokenizer regex failed: ") +
                                        reinterpret_cast<const char*>(msg.data()));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t begin = ov[0];
      const size_t end = ov[1];
      if (end == begin) {  // none of our patterns match empty, but never loop
        const size_t len = utf8::sequence_length(piece, begin);
        pos = begin + (len == 0 ? 1 : len);
        continue;
      }
      if (begin > last) out.push_back(piece.substr(last, begin - last));
      out.push_back(piece.substr(begin, end - begin));
      last = pos = end;
    }
    if (last < piece.size()) out.push_back(piece.substr(last));
  }

  const pcre2_code* code() const { return code_; }

 private:
  pcre2_code* code_ = nullptr;
};

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
constexpr const char* kDigit = R"(\p{N})";

struct Named {
  std::string_view name;
  std::vector<const char*> steps;
};

const std::vector<Named>& table() {
  static const std::vector<Named> t = {
      {"default", {kGpt2}},   {"gpt-2", {kGpt2}},   {"llama-bpe", {kLlama3}},
      {"llama3", {kLlama3}},  {"qwen2", {kQwen2}},  {"smollm", {kDigit, kGpt2}},
  };
  return t;
}

}  // namespace

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
    for (const char* pattern : n.steps) steps_.push_back(std::make_unique<Regex>(pattern));
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
    // Match data per call keeps split() safe to run from several threads.
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(step->code(), nullptr);
    if (md == nullptr) throw Error(Errc::out_of_memory, "tokenizer: cannot allocate regex match data");
    next.clear();
    try {
      for (const std::string_view piece : pieces) step->split(piece, md, next);
    } catch (...) {
      pcre2_match_data_free(md);
      throw;
    }
    pcre2_match_data_free(md);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace troupe
