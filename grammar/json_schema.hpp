// JSON Schema to grammar: the output constraint behind OpenAI's
// response_format {"type": "json_schema"} and JSON mode. Objects keep the
// schema's property order (as OpenAI's structured outputs and llama.cpp
// write them); a keyword that asserts something this compiler cannot
// enforce (pattern, multipleOf, ...) is refused by name rather than
// silently ignored, while annotations (title, description, format, ...)
// and unknown keywords are ignored as the JSON Schema spec says.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "grammar/grammar.hpp"

namespace troupe::grammar {

// A grammar for the JSON documents `schema` (JSON text) accepts, with
// bounded whitespace around them. additionalProperties absent means none
// (strict, as OpenAI's structured outputs require it); `true` or a schema
// allows members after the listed ones. Throws Error(invalid_argument)
// saying which keyword, at which path ("#/properties/age"), is malformed or
// not supported.
std::shared_ptr<const Grammar> json_schema_grammar(std::string_view schema);

// Values the schema accepts inside fixed text: `open`, then one to
// `max_values` (< 0: any number of) values, each between `item_open` and
// `item_close`, joined by `separator`, then `close`. No whitespace around
// the values: the text fixes it. This is the shape of a model's tool calls
// (<tool_call>\n{...}\n</tool_call>, or {...}; {...}).
struct JsonFrame {
  std::string open, item_open, item_close, separator, close;
  int32_t max_values = 1;
};
std::shared_ptr<const Grammar> framed_json_grammar(std::string_view schema, const JsonFrame& frame);

// JSON mode: any JSON object.
std::shared_ptr<const Grammar> json_object_grammar();

// One of the strings of `choices` (a JSON array of strings), exactly, as
// raw text (vLLM's guided_choice). Throws Error(invalid_argument) for
// anything but a non-empty array of strings.
std::shared_ptr<const Grammar> choice_grammar(std::string_view choices);

}  // namespace troupe::grammar
