// Operators and lookups of the template language with Python's semantics:
// arithmetic (int/float promotion, floor division, modulo sign), `~`,
// comparisons, `in`, attribute and item access, and slicing. Jinja's lookup
// rule holds throughout: a missing attribute or item is Undefined, never an
// error, unless the object itself is Undefined.
#pragma once

#include <string>

#include "tokenizer/jinja_ast.hpp"
#include "tokenizer/jinja_value.hpp"

namespace troupe::jinja {

// add, sub, mul, div, floordiv, mod, pow, concat. Throws Failure.
Value binary_op(Op op, const Value& a, const Value& b);
// neg, pos, not_.
Value unary_op(Op op, const Value& a);
// eq, ne, lt, le, gt, ge, in, not_in.
bool compare_op(Op op, const Value& a, const Value& b);
// Python's `item in container`.
bool contains(const Value& container, const Value& item);

// obj.name: a method of obj's type bound to it, a dict's key, a namespace's
// attribute, else Undefined.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: item first, then (for a string key) the attribute.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] on strings (by code point), lists, tuples and ranges;
// each bound may be Undefined or None for "absent". Other objects fail.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Jinja's attribute paths for filters: "a.b.0" reads obj["a"]["b"][0].
Value get_path(const Value& obj, const std::string& path);

}  // namespace troupe::jinja
