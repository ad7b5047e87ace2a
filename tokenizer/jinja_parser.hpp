// Parses a chat template's tokens into a syntax tree, with Jinja's operator
// precedence. Constructs outside the supported subset are rejected here, at
// load time, with an error naming the construct and its line:col.
#pragma once

#include <string_view>

#include "tokenizer/jinja_ast.hpp"

namespace troupe::jinja {

// Throws Error(bad_format) for syntax errors and Error(unsupported) for
// valid Jinja that this interpreter does not implement (include, extends,
// call blocks, recursive loops, unknown filters or tests, ...).
Template parse(std::string_view source);

// Whether the interpreter implements a filter or test of this name
// (jinja_builtins.cpp); the parser checks names against these.
bool has_filter(std::string_view name);
bool has_test(std::string_view name);

}  // namespace troupe::jinja
