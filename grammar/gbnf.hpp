// GBNF, the grammar notation llama.cpp's server and CLI take (`grammar`,
// `--grammar-file`), compiled to a byte Grammar: rules `name ::= ...`,
// "literals", [character classes] (negation, ranges, \x \u \U escapes),
// `.`, groups, | alternatives, * + ? {m} {m,} {m,n}, # comments. Terminals
// are Unicode code points, written as their UTF-8 bytes. llama.cpp's token
// terminals (<[id]>, <text>, !<...>) are refused: they name tokens of one
// vocabulary, not text.
#pragma once

#include <memory>
#include <string_view>

#include "grammar/grammar.hpp"

namespace troupe::grammar {

// The grammar rooted at rule `root`. Throws Error(invalid_argument)
// naming the line and column of a syntax error, an undefined or doubly
// defined rule, or left recursion.
std::shared_ptr<const Grammar> gbnf_grammar(std::string_view text);

// A code-point range [lo, hi] as UTF-8: alternatives of byte-range
// symbols, one per run of sequences whose bytes vary position by position
// (surrogates excluded). Appended to `out`.
void utf8_alternatives(uint32_t lo, uint32_t hi, std::vector<Alternative>& out);

}  // namespace troupe::grammar
