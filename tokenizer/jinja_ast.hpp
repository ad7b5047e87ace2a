// The syntax tree of a parsed chat template: expressions and statements as
// plain structs, each with its source position (line:col) for error messages.
// jinja_parser builds it; jinja_eval walks it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.hpp"

namespace troupe::jinja {

struct Pos {
  int line = 1;
  int col = 1;  // in code points, from 1
};

// "chat template 3:14: <what>": the prefix of every template error.
std::string at(Pos pos, const std::string& what);

enum class ExprKind : uint8_t {
  literal,      // value
  name,         // name
  list,         // args: elements
  tuple,        // args: elements
  dict,         // args: key0, value0, key1, value1, ...
  attr,         // args[0].name
  item,         // args[0][args[1]]
  slice,        // args[0][args[1]:args[2]:args[3]], each bound may be null
  call,         // args[0](args[1..], kwargs)
  filter,       // args[0] | name(args[1..], kwargs); args[0] null in filter blocks
  test,         // args[0] is [not] name(args[1..]); negated for "is not"
  unary,        // op args[0]
  binary,       // args[0] op args[1], including and/or
  compare,      // args[0] ops[0] args[1] ops[1] args[2] ... (chained)
  conditional,  // args[0] if args[1] else args[2] (args[2] may be null)
};

enum class Op : uint8_t {
  add, sub, mul, div, floordiv, mod, pow, concat, and_, or_,  // binary
  not_, neg, pos,                                             // unary
  eq, ne, lt, le, gt, ge, in, not_in,                         // compare
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  ExprKind kind = ExprKind::literal;
  Pos pos;
  Value value;
  std::string name;
  Op op = Op::add;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<Op> ops;
  int height = 1;  // of this subtree; the parser bounds it so evaluation cannot overflow the stack
};

enum class StmtKind : uint8_t {
  text,          // text
  output,        // {{ expr }}
  if_,           // branches (cond, body); else_body
  for_,          // for targets in expr [if filter_cond]: body; else_body
  set,           // targets (or targets[0].attr) = expr
  set_block,     // {% set targets[0] | filters %}body{% endset %}
  macro,         // {% macro targets[0](params) %}body{% endmacro %}
  filter_block,  // {% filter filters %}body{% endfilter %}
  with,          // {% with assigns %}body{% endwith %}
  generation,    // {% generation %}body{% endgeneration %} (transformers' marker)
  break_,
  continue_,
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required (Undefined when not passed)
};

struct Stmt {
  StmtKind kind = StmtKind::text;
  Pos pos;
  std::string text;
  ExprPtr expr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;
  std::string attr;  // set: assign to namespace targets[0] attribute `attr`
  ExprPtr filter_cond;
  std::vector<ExprPtr> filters;
  std::vector<MacroParam> params;
  bool catch_varargs = false;  // macro: its body reads `varargs`, so extra positional arguments go there
  bool catch_kwargs = false;   // and `kwargs`, for unknown keyword arguments
  std::vector<std::pair<std::string, ExprPtr>> assigns;
};

struct Template {
  Body body;
};

}  // namespace troupe::jinja
