// A compiled PCRE2 pattern in UTF + Unicode-property mode, for the
// pre-tokenizer splits (\p{L}, \p{N}, look-ahead). Shared by the GGUF
// pre-tokenizer table and tokenizer.json's Split/ByteLevel/Digits steps.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace troupe {

class Regex {
 public:
  // A byte span [first, second) of the subject.
  using Span = std::pair<size_t, size_t>;

  // Throws Error(errc) with `what` and PCRE2's reason if the pattern does not
  // compile (internal for built-in patterns, unsupported for a file's).
  Regex(std::string_view pattern, const std::string& what, Errc errc);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the spans of the non-empty matches in text, left to right, each
  // search starting where the previous match ended. text must be valid UTF-8
  // (not checked again). Safe to call from several threads at once.
  void find_all(std::string_view text, std::vector<Span>& out) const;

  // Appends text cut at the matches, keeping matches and the text between
  // them ("isolated"); together the pieces are exactly text.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  struct Code;
  Code* code_ = nullptr;
};

}  // namespace troupe
