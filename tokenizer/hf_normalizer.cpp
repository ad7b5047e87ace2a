// The normalizers of hf_normalizer.hpp. Unicode normal forms come from
// utf8proc; Prepend adds nothing to empty text, as Hugging Face's does.
#include "tokenizer/hf_normalizer.hpp"
#include "tokenizer/text_util.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.hpp"

namespace troupe::hf {
namespace {

bool is_ascii(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

std::string unicode_form(std::string_view text, int options) {
  // Every normal form leaves ASCII alone.
  if (is_ascii(text)) return std::string(text);
  utf8proc_uint8_t* out = nullptr;
  // An explicit length (no UTF8PROC_NULLTERM) keeps NUL characters.
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
  if (n < 0) {
    throw Error(Errc::invalid_argument,
                std::string("tokenizer: Unicode normalization failed: ") + utf8proc_errmsg(n));
  }
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

}  // namespace

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::nfc: s = unicode_form(s, UTF8PROC_COMPOSE); break;
      case NormalizerStep::Kind::nfd: s = unicode_form(s, UTF8PROC_DECOMPOSE); break;
      case NormalizerStep::Kind::nfkc: s = unicode_form(s, UTF8PROC_COMPOSE | UTF8PROC_COMPAT); break;
      case NormalizerStep::Kind::nfkd: s = unicode_form(s, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT); break;
      case NormalizerStep::Kind::prepend:
        // (Not s.insert(0, ...): GCC 12 warns falsely about it at -O3.)
        if (!s.empty()) s = step.content + s;
        break;
      case NormalizerStep::Kind::replace: s = replace_all(s, step.pattern, step.content); break;
    }
  }
  return s;
}

}  // namespace troupe::hf
