// Values of the Jinja-subset interpreter behind chat templates: the Python
// objects a template sees (None, bool, int, float, str, list, tuple, dict,
// namespace, functions, plus Jinja's Undefined) with Python's truthiness,
// equality, ordering, str() and repr(), so output matches transformers.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/error.hpp"

namespace troupe::jinja {

class Value;
class Interpreter;

// A failure inside a value operation or a builtin. The interpreter turns it
// into a troupe::Error that also names the template position.
class Failure : public std::runtime_error {
 public:
  Failure(Errc code, const std::string& what) : std::runtime_error(what), code_(code) {}
  Errc code() const { return code_; }

 private:
  Errc code_;
};

// What a sequence value is in Python: lists and tuples are ordinary; the
// others are what dict views, filters and range() return, which differ in
// printing, indexing, len() and truthiness.
enum class SeqKind : uint8_t {
  list,
  tuple,
  iterator,     // a generator (map, select, reverse ...): always true, no len, one pass
  dict_items,   // dict.items(), dict.keys(), dict.values(): no indexing
  dict_keys,
  dict_values,
  range,        // range(): prints as range(start, stop[, step])
};

struct SeqData {
  std::vector<Value> items;
  SeqKind kind = SeqKind::list;
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // SeqKind::range: what it prints
  // Generators are consumed as they are read: items before `cursor` are gone.
  mutable size_t cursor = 0;
};

// Insertion-ordered mapping (a Python dict; also a namespace's attributes).
struct DictData {
  std::vector<std::pair<Value, Value>> items;

  const Value* find(const Value& key) const;
  Value* find(const Value& key);
  void set(Value key, Value value);  // replaces in place or appends
};

// Arguments of a call: f(a, b, key=value).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};

class Callable {
 public:
  virtual ~Callable() = default;
  virtual std::string name() const = 0;
  virtual Value call(Interpreter& interp, CallArgs args) = 0;
};

class Value {
 public:
  enum class Kind : uint8_t { undefined, none, boolean, integer, floating, string, sequence, dict, ns, callable };

  Value() = default;  // Undefined
  Value(bool b) : data_(b) {}
  Value(int64_t i) : data_(i) {}
  Value(int i) : data_(static_cast<int64_t>(i)) {}
  Value(double f) : data_(f) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(const char* s) : data_(std::string(s)) {}

  // Undefined with the reason it is (for the error when it is used).
  static Value undefined(std::string hint);
  static Value none();
  static Value sequence(std::vector<Value> items, SeqKind kind = SeqKind::list);
  static Value tuple(std::vector<Value> items) { return sequence(std::move(items), SeqKind::tuple); }
  // range(start, stop, step) with its items already made (the caller bounds them).
  static Value range(std::vector<Value> items, int64_t start, int64_t stop, int64_t step);
  static Value dict(DictData d);
  static Value ns(DictData attributes);
  static Value callable(std::shared_ptr<Callable> fn);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::undefined; }
  bool is_none() const { return kind() == Kind::none; }
  bool is_bool() const { return kind() == Kind::boolean; }
  bool is_int() const { return kind() == Kind::integer; }
  bool is_float() const { return kind() == Kind::floating; }
  // int, float or bool: Python's numbers (bool is an int).
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::string; }
  bool is_sequence() const { return kind() == Kind::sequence; }
  bool is_list_or_tuple() const;
  bool is_dict() const { return kind() == Kind::dict; }
  bool is_ns() const { return kind() == Kind::ns; }
  bool is_callable() const { return kind() == Kind::callable; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;   // int or bool
  double as_float() const;  // any number
  const std::string& as_string() const { return std::get<std::string>(data_); }
  const SeqData& as_seq() const { return *std::get<std::shared_ptr<SeqData>>(data_); }
  const DictData& as_dict() const { return *std::get<std::shared_ptr<const DictData>>(data_); }
  DictData& as_ns() const { return *std::get<std::shared_ptr<DictData>>(data_); }
  Callable& as_callable() const { return *std::get<std::shared_ptr<Callable>>(data_); }
  const std::string& undefined_hint() const { return std::get<Undef>(data_).hint; }

  // Identity of containers, for Jinja's `sameas`.
  const void* identity() const;

 private:
  struct Undef {
    std::string hint;
  };
  struct None {};
  std::variant<Undef, None, bool, int64_t, double, std::string, std::shared_ptr<SeqData>,
               std::shared_ptr<const DictData>, std::shared_ptr<DictData>, std::shared_ptr<Callable>>
      data_;
};

// Python's type name ("str", "dict", "NoneType"), for error messages.
std::string type_name(const Value& v);

// Python truthiness; Undefined is false.
bool truthy(const Value& v);

// The render's stack bound, per thread: the lowest address the interpreter
// and the value functions below may recurse to (set by Interpreter::render;
// 0: none). Returns the one it replaces.
uintptr_t set_render_stack_floor(uintptr_t floor);
// Whether the caller's frame is past that floor. A frame far below it (a
// sanitizer's fake stack) is not on the render's stack and is not judged.
bool past_render_stack();
// Throws Failure "<what>: value nested too deeply (over the render's stack)"
// when past_render_stack().
void check_value_stack(const char* what);

// Python str(): what `{{ v }}` prints. Undefined prints as "".
std::string to_str(const Value& v);
std::string repr(const Value& v);

// Python ==: numbers compare by value across int/float/bool, containers
// deeply, different types are unequal. Undefined equals only Undefined.
bool equals(const Value& a, const Value& b);

// Python ordering (<0, 0, >0): numbers, strings (by code point), and
// lists or tuples element by element. Throws Failure for other pairs.
int compare(const Value& a, const Value& b);

// Whether Python can hash it (be a dict key, be looked up with `in` a dict):
// not lists, dicts or dict views, nor tuples holding them.
bool hashable(const Value& v);

// Throws Failure naming the Undefined's hint (Jinja's UndefinedError).
[[noreturn]] void fail_undefined(const Value& v);

// The elements a for loop visits: a sequence's items, a dict's keys, a
// string's characters; Undefined gives none. Reading a generator consumes it.
std::vector<Value> iterate(const Value& v);

}  // namespace troupe::jinja
