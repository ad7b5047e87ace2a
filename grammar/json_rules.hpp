// The pieces of JSON as grammar rules, made once per grammar on first use:
// whitespace, strings, numbers, integers in a range, any value. The JSON
// schema compiler builds its rules from these; JSON mode is `any_object`.
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/grammar.hpp"

namespace troupe::grammar {

class JsonRules {
 public:
  // Whitespace between tokens: nothing, one space, or a line break and an
  // indent of at most this many spaces or tabs (llama.cpp's JSON grammars
  // bound it so too), so a model cannot pad forever.
  static constexpr int32_t kMaxIndent = 20;
  // Digits of an integer part: int64 range, as JSON parsers read it.
  static constexpr int32_t kMaxIntDigits = 16;

  explicit JsonRules(Grammar& g) : g_(g) {}

  int32_t ws();
  int32_t string();                        // "..." with escapes, UTF-8 checked by structure
  int32_t string(int32_t min_chars, int32_t max_chars);  // characters (an escape is one); max < 0: no bound
  int32_t number();
  int32_t integer();
  // Integers n with lo <= n <= hi (nullopt: no bound). Throws
  // Error(invalid_argument) for an empty range.
  int32_t integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);
  int32_t non_negative_number();
  int32_t boolean();
  int32_t null();
  int32_t value();       // any JSON value
  int32_t any_object();  // any JSON object
  int32_t any_array();

  // "[" ws ( item ws ( "," ws item ws ){min-1,max-1} )? "]", item a rule.
  int32_t array_of(int32_t item, int32_t min_items, int32_t max_items, const std::string& name);
  // ws value ws: what a whole output is.
  int32_t document(int32_t value);

 private:
  int32_t char_rule();
  int32_t digits_between(const std::string& lo, const std::string& hi);  // same length, lo <= hi
  int32_t magnitude(uint64_t lo, std::optional<uint64_t> hi);           // decimal n, lo <= n <= hi
  int32_t object_rule();

  Grammar& g_;
  int32_t ws_ = -1, char_ = -1, string_ = -1, number_ = -1, integer_ = -1, nonneg_number_ = -1;
  int32_t boolean_ = -1, null_ = -1, value_ = -1, object_ = -1, array_ = -1;
};

}  // namespace troupe::grammar
