// The builtins a chat template can call: filters (jinja_filters.cpp), tests
// and global functions (jinja_globals.cpp), and the Python methods of str,
// dict and list (jinja_methods.cpp), plus Python-style argument binding.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja_value.hpp"

namespace troupe::jinja {

// Binds call arguments to parameter names as Python does; throws Failure
// for unknown or repeated names, too many arguments, or a missing required
// one (the first `required` parameters). With varargs, extra positional and
// keyword arguments are kept in rest()/rest_named() instead (map, select:
// they go on to the filter or test they name).
class BoundArgs {
 public:
  BoundArgs(std::string_view fn, CallArgs args, std::initializer_list<std::string_view> params,
            size_t required = 0, bool varargs = false);
  bool has(size_t i) const { return values_[i].has_value(); }
  // The argument, or Undefined when it was not passed.
  const Value& operator[](size_t i) const;
  Value get_or(size_t i, Value fallback) const { return has(i) ? *values_[i] : std::move(fallback); }
  // Positional arguments beyond the named parameters (for *args filters).
  std::vector<Value>& rest() { return rest_; }
  std::vector<std::pair<std::string, Value>>& rest_named() { return rest_named_; }

  // Type checks that name the function in their error.
  int64_t int_at(size_t i, int64_t fallback) const;
  std::string string_at(size_t i, std::string fallback) const;
  bool bool_at(size_t i, bool fallback) const { return has(i) ? truthy(*values_[i]) : fallback; }

 private:
  std::string fn_;
  std::vector<std::optional<Value>> values_;
  std::vector<Value> rest_;
  std::vector<std::pair<std::string, Value>> rest_named_;
  Value undefined_;
};

// Filters: input | name(args). has_filter() is in jinja_parser.hpp.
Value apply_filter(Interpreter& interp, std::string_view name, Value input, CallArgs args);
// Tests: input is name(args).
bool apply_test(Interpreter& interp, std::string_view name, const Value& input, CallArgs args);

// A method of self's Python type bound to it (s.strip, d.items, l.index),
// or nullopt when the type has none of that name.
std::optional<Value> bound_method(const Value& self, const std::string& name);

// Global functions: range, dict, namespace, raise_exception, strftime_now,
// and Jinja's lipsum/cycler/joiner (which raise "not supported").
std::vector<std::pair<std::string, Value>> global_functions();

}  // namespace troupe::jinja
