// Character classes as Hugging Face's `tokenizers` (Rust) defines them for
// BERT: whitespace is Rust's char::is_whitespace, punctuation is ASCII
// punctuation plus the P* categories, control is the C* categories but Cn.
// The categories come from utf8proc.
#pragma once

#include <string>
#include <string_view>

namespace troupe::unicode {

// Rust's char::is_whitespace: the White_Space property (tab..CR, space, NEL,
// NBSP, U+1680, U+2000..200A, LS, PS, U+202F, U+205F, U+3000).
bool is_whitespace(char32_t cp);
// ASCII punctuation (symbols such as $ ^ ` included) or a P* category.
bool is_punctuation(char32_t cp);
// Cc, Cf, Co or Cs (unicode_categories' is_other, which lacks Cn).
bool is_other(char32_t cp);
// Mn only, or any mark (Mn, Mc, Me).
bool is_nonspacing_mark(char32_t cp);
bool is_mark(char32_t cp);
// The CJK ideograph ranges BertNormalizer pads with spaces (Hugging Face's
// list, which starts its fifth extension range at U+2B920, not U+2B820).
bool is_cjk_ideograph(char32_t cp);

// Rust's char::to_lowercase per character: utf8proc's simple mapping, plus
// the one unconditional multi-character mapping (U+0130 -> "i\u0307"). No
// final-sigma rule, as Hugging Face lowercases character by character.
void append_lowercase(std::string& out, char32_t cp);

}  // namespace troupe::unicode
