// PCRE2 behind tokenizer/regex.hpp. JIT-compiled where the platform allows;
// the interpreter gives the same matches.
#include "tokenizer/regex.hpp"

#include <pcre2.h>

#include <array>

#include "core/error.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe {

struct Regex::Code {
  pcre2_code* code = nullptr;
};

namespace {

std::string pcre2_message(int rc) {
  std::array<PCRE2_UCHAR, 256> msg{};
  pcre2_get_error_message(rc, msg.data(), msg.size());
  return reinterpret_cast<const char*>(msg.data());
}

// Match data per call keeps find_all() safe to run from several threads.
struct MatchData {
  explicit MatchData(const pcre2_code* code) : md(pcre2_match_data_create_from_pattern(code, nullptr)) {
    if (md == nullptr) throw Error(Errc::out_of_memory, "tokenizer: cannot allocate regex match data");
  }
  ~MatchData() { pcre2_match_data_free(md); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* md;
};

}  // namespace

Regex::Regex(std::string_view pattern, const std::string& what, Errc errc) : code_(new Code) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (code_->code == nullptr) {
    delete code_;
    throw Error(errc, what + ": regex does not compile at offset " + std::to_string(offset) +
                           ": " + pcre2_message(err));
  }
  pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() {
  pcre2_code_free(code_->code);
  delete code_;
}

void Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  MatchData data(code_->code);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, data.md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw Error(Errc::internal, "tokenizer: pre-tokenizer regex failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
    const size_t begin = ov[0];
    const size_t end = ov[1];
    if (end == begin) {
      // An empty match splits nothing (Hugging Face drops empty pieces);
      // step over one character so the search moves on.
      const size_t len = utf8::sequence_length(text, begin);
      pos = begin + (len == 0 ? 1 : len);
      continue;
    }
    out.emplace_back(begin, end);
    pos = end;
  }
}

void Regex::split(std::string_view text, std::vector<std::string_view>& out) const {
  std::vector<Span> spans;
  find_all(text, spans);
  size_t last = 0;
  for (const auto& [begin, end] : spans) {
    if (begin > last) out.push_back(text.substr(last, begin - last));
    out.push_back(text.substr(begin, end - begin));
    last = end;
  }
  if (last < text.size()) out.push_back(text.substr(last));
}

}  // namespace troupe
