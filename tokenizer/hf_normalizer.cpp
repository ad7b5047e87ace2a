// The normalizers of hf_normalizer.hpp. Unicode normal forms and character
// classes come from utf8proc; Prepend adds nothing to empty text, as Hugging
// Face's does. Replace with a regex rewrites every match, left to right, as
// Hugging Face's (Oniguruma) does. BertNormalizer's steps run in Hugging Face's order: clean,
// CJK spacing, accents, lowercase.
#include "tokenizer/hf_normalizer.hpp"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "tokenizer/precompiled_charsmap.hpp"
#include "tokenizer/regex.hpp"
#include "tokenizer/text_util.hpp"
#include "tokenizer/unicode_classes.hpp"
#include "tokenizer/utf8.hpp"

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

// Rebuilds valid UTF-8 text one character at a time: keep(cp, out) appends
// what the character becomes.
template <typename Keep>
std::string map_chars(std::string_view text, Keep keep) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8::sequence_length(text, pos);
    if (len == 0) throw Error(Errc::internal, "tokenizer: normalizer input is not valid UTF-8");
    keep(utf8::decode_at(text, pos, len), out);
    pos += len;
  }
  return out;
}

// BERT's clean_text: tab, newline and CR count as whitespace, not control;
// the other whitespace controls (VT, FF, NEL) are dropped as controls.
std::string clean_text(std::string_view text) {
  return map_chars(text, [](char32_t cp, std::string& out) {
    const bool tab_or_newline = cp == '\t' || cp == '\n' || cp == '\r';
    if (cp == 0 || cp == 0xFFFD || (!tab_or_newline && unicode::is_other(cp))) return;
    utf8::append(out, unicode::is_whitespace(cp) ? U' ' : cp);
  });
}

std::string pad_cjk(std::string_view text) {
  return map_chars(text, [](char32_t cp, std::string& out) {
    const bool cjk = unicode::is_cjk_ideograph(cp);
    if (cjk) out += ' ';
    utf8::append(out, cp);
    if (cjk) out += ' ';
  });
}

// nonspacing_only: BertNormalizer's Mn; else StripAccents' every mark.
std::string drop_marks(std::string_view text, bool nonspacing_only) {
  return map_chars(text, [nonspacing_only](char32_t cp, std::string& out) {
    if (nonspacing_only ? unicode::is_nonspacing_mark(cp) : unicode::is_mark(cp)) return;
    utf8::append(out, cp);
  });
}

std::string lowercase(std::string_view text) {
  return map_chars(text, [](char32_t cp, std::string& out) { unicode::append_lowercase(out, cp); });
}

// Rust's trim_start / trim_end: whitespace characters at either end.
std::string strip(std::string_view text, bool left, bool right) {
  std::vector<size_t> starts;  // of each character, then text.size()
  for (size_t pos = 0; pos < text.size();) {
    starts.push_back(pos);
    const size_t len = utf8::sequence_length(text, pos);
    pos += len == 0 ? 1 : len;
  }
  starts.push_back(text.size());
  auto space_at = [&](size_t i) {
    return unicode::is_whitespace(utf8::decode_at(text, starts[i], starts[i + 1] - starts[i]));
  };
  size_t first = 0;
  size_t last = starts.size() - 1;  // one past the last kept character
  while (left && first < last && space_at(first)) ++first;
  while (right && last > first && space_at(last - 1)) --last;
  return std::string(text.substr(starts[first], starts[last] - starts[first]));
}

std::string replace_matches(std::string_view text, const Regex& re, std::string_view content) {
  std::vector<Regex::Span> matches;
  re.find_all(text, matches);
  std::string out;
  size_t last = 0;
  for (const auto& [begin, end] : matches) {
    out.append(text.substr(last, begin - last)).append(content);
    last = end;
  }
  out.append(text.substr(last));
  return out;
}

std::string bert_normalize(std::string text, const BertNormalizerOptions& o) {
  if (o.clean_text) text = clean_text(text);
  if (o.handle_chinese_chars) text = pad_cjk(text);
  if (o.strip_accents) text = drop_marks(unicode_form(text, UTF8PROC_DECOMPOSE), true);
  if (o.lowercase) text = lowercase(text);
  return text;
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
      case NormalizerStep::Kind::replace:
        s = step.regex ? replace_matches(s, *step.regex, step.content) : replace_all(s, step.pattern, step.content);
        break;
      case NormalizerStep::Kind::bert: s = bert_normalize(std::move(s), step.bert); break;
      case NormalizerStep::Kind::lowercase: s = lowercase(s); break;
      case NormalizerStep::Kind::strip_accents: s = drop_marks(s, false); break;
      case NormalizerStep::Kind::strip: s = strip(s, step.strip_left, step.strip_right); break;
      case NormalizerStep::Kind::precompiled:
        s = step.charsmap->normalize(s);
        break;
    }
  }
  return s;
}

}  // namespace troupe::hf
