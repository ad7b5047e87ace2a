// Splits a chat template into text and tag tokens, applying whitespace
// control the way transformers configures Jinja: trim_blocks, lstrip_blocks,
// the "-" and "+" tag modifiers, {% raw %}, and keep_trailing_newline off.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja_ast.hpp"

namespace troupe::jinja {

enum class TokKind : uint8_t {
  text,         // template data, whitespace control already applied
  var_begin,    // {{
  var_end,      // }}
  block_begin,  // {%
  block_end,    // %}
  name,
  string,       // text holds the unescaped value
  integer,      // value holds it
  floating,     // value holds it
  op,           // text holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
  eof,
};

struct Token {
  TokKind kind = TokKind::eof;
  std::string text;
  Value value;
  Pos pos;
};

// Throws Error(bad_format) with the position for malformed input (an
// unclosed tag, comment or string, an unexpected character, unbalanced
// brackets) and Error(invalid_argument) when source is not valid UTF-8.
std::vector<Token> lex(std::string_view source);

}  // namespace troupe::jinja
