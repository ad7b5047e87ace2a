// Renders a parsed template: walks the statements, evaluates expressions,
// and keeps Jinja's scoping (a for loop's body gets a fresh scope on every
// iteration; if/elif do not scope; macros close over their defining scope).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/jinja_ast.hpp"
#include "tokenizer/jinja_value.hpp"

namespace troupe::jinja {

// Variables visible at one point of a template: its own, then its parent's.
class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value v);

 private:
  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

class Interpreter {
 public:
  explicit Interpreter(const Template& tpl) : tpl_(tpl) {}
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders with these variables on top of the global functions. Throws
  // troupe::Error naming the template position of the failure.
  std::string render(const std::vector<std::pair<std::string, Value>>& variables);

  // For builtins: a value called with arguments (macros, functions, methods).
  Value call(const Value& fn, CallArgs args);
  // namespace() registers what it makes, to be emptied when rendering ends.
  void own_namespace(const Value& ns);
  // Runs a macro's body in a new scope below the one it was defined in.
  std::string call_macro(const Stmt& def, const std::shared_ptr<Scope>& closure, CallArgs args);

 private:
  enum class Flow { normal, break_, continue_ };

  Flow exec_body(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  void exec_set(const Stmt& s, Scope& scope, Value v);
  std::string capture(const Body& body, const std::shared_ptr<Scope>& scope);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value v, Scope& scope);

  // Counts one unit of work; throws once the render is over kMaxSteps or
  // past its deadline (jinja_limits.hpp).
  void step();
  Value eval(const Expr& e, Scope& scope);
  Value eval_inner(const Expr& e, Scope& scope);
  CallArgs eval_args(const Expr& e, size_t first, Scope& scope);
  void bind_targets(const std::vector<std::string>& targets, const Value& v, Scope& scope);

  const Template& tpl_;
  int depth_ = 0;  // nesting of statements, expressions and macro calls, bounded
  size_t stack_budget_ = 0;  // bytes of stack this render may use (its floor: set_render_stack_floor)
  int64_t steps_ = 0;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<std::shared_ptr<Scope>> macro_scopes_;  // macros hold their scope weakly; these keep it
  std::vector<Value> namespaces_;
};

}  // namespace troupe::jinja
