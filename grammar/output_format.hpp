// What a request asks its output to be (OpenAI's response_format), as
// plain data that travels with the request, and the grammar it compiles
// to. Compiled grammars are cached by their text: the request rules
// compile a format to check it, the sampler takes the same grammar, and
// clients that send one schema with every request compile it once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "grammar/grammar.hpp"
#include "grammar/token_constraint.hpp"
#include "grammar/token_grammar.hpp"

namespace troupe {

struct OutputFormat {
  enum class Kind : uint8_t {
    text,         // no constraint
    json_object,  // JSON mode: any JSON object
    json_schema,  // a document `schema` accepts
    gbnf,         // a sentence of the GBNF grammar in `schema` (llama.cpp's `grammar`)
    choice,       // exactly one of the strings of the JSON array in `schema` (vLLM's guided_choice)
    tool_calls,   // calls of the tools in `schema` (grammar/tool_call_grammar.hpp): tool_choice required or named
  };
  Kind kind = Kind::text;
  std::string schema;  // the schema, grammar or choices as text
  std::string param;   // the request field that gave it, for errors; empty: response_format

  bool constrained() const { return kind != Kind::text; }
};

// The grammar of a constrained format; throws Error(invalid_argument)
// saying what in the schema is wrong or not supported.
std::shared_ptr<const grammar::Grammar> output_grammar(const OutputFormat& format);

// What a sampler applies for a constrained format: its grammar over the
// vocabulary, from the first token on, or (tool_choice "auto") from the
// trigger that opens a call on. cache: masks shared by the requests of
// the same grammar.
std::unique_ptr<TokenConstraint> token_constraint(const OutputFormat& format,
                                                  std::shared_ptr<const grammar::TokenTrie> trie,
                                                  std::shared_ptr<grammar::MaskCache> cache);

}  // namespace troupe
