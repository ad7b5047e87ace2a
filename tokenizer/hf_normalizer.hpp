// tokenizer.json normalizers: the text rewrites Hugging Face runs on each
// piece of input between added tokens, before pre-tokenization. Supported:
// NFC, NFD, NFKC, NFKD (utf8proc), Prepend, Replace (a plain string or a
// PCRE2 regex), BertNormalizer, Lowercase, StripAccents, Strip, Precompiled
// (SentencePiece's charsmap, precompiled_charsmap.hpp), and Sequence of these.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe {
class Regex;
}

namespace troupe::hf {

class PrecompiledCharsmap;

// BertNormalizer's switches; strip_accents is already resolved (a null in
// tokenizer.json follows lowercase).
struct BertNormalizerOptions {
  bool clean_text = true;            // drop NUL, U+FFFD and controls; whitespace -> ' '
  bool handle_chinese_chars = true;  // a space either side of each CJK ideograph
  bool strip_accents = true;         // NFD, then drop nonspacing marks
  bool lowercase = true;
};

struct NormalizerStep {
  enum class Kind { nfc, nfd, nfkc, nfkd, prepend, replace, bert, lowercase, strip_accents, strip, precompiled };
  Kind kind = Kind::nfc;
  std::string pattern;  // replace: the text to find
  std::string content;  // prepend: the text put first; replace: the substitute
  BertNormalizerOptions bert;
  bool strip_left = false;  // strip: remove leading / trailing whitespace
  bool strip_right = false;
  std::shared_ptr<const Regex> regex;                   // replace: the pattern compiled, if a Regex; else plain text
  std::shared_ptr<const PrecompiledCharsmap> charsmap;  // precompiled
};

class Normalizer {
 public:
  Normalizer() = default;  // changes nothing
  explicit Normalizer(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {}
  // From the JSON of a tokenizer.json "normalizer" value (null: none).
  static Normalizer from_json(std::string_view json_text);

  // The steps in order. text must be valid UTF-8; so is the result.
  std::string apply(std::string_view text) const;
  bool empty() const { return steps_.empty(); }

 private:
  std::vector<NormalizerStep> steps_;
};

}  // namespace troupe::hf
