// JSON in and out of the template interpreter: request data (messages, tools)
// becomes template values in the order it was written, and the tojson filter
// prints values exactly as Python's json.dumps does under transformers.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "tokenizer/jinja_value.hpp"

namespace troupe::jinja {

// Objects become dicts in document order, arrays lists; integers outside
// int64 become floats (Python would keep them exact).
Value from_json(const nlohmann::ordered_json& j);

// json.dumps options as transformers' tojson filter passes them.
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // nullopt: one line; else the text per level
  std::optional<std::string> item_separator;  // default ", " (one line) or "," (indented)
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// Throws Failure for values JSON cannot hold (Undefined, namespaces,
// functions) and for sort_keys over keys of mixed types.
std::string to_json(const Value& v, const JsonDumpOptions& options);

}  // namespace troupe::jinja
