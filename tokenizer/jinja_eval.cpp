// The template interpreter (see jinja_eval.hpp). Errors from values and
// builtins (Failure) are turned into troupe::Error at the innermost
// expression or statement, so the message names that position.
#include "tokenizer/jinja_eval.hpp"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "tokenizer/jinja_builtins.hpp"
#include "tokenizer/jinja_limits.hpp"
#include "tokenizer/jinja_ops.hpp"

namespace troupe::jinja {
namespace {

// One more level of nesting, within kMaxDepth and the render's stack
// (stack_budget bytes down to the floor render() set).
class DepthGuard {
 public:
  DepthGuard(int& depth, size_t stack_budget) : depth_(depth) {
    if (++depth_ > kMaxDepth) {
      --depth_;
      throw Failure(Errc::invalid_argument,
                    "template recursion is too deep (more than " + std::to_string(kMaxDepth) + " levels)");
    }
    if (past_render_stack()) {
      --depth_;
      throw Failure(Errc::invalid_argument,
                    "template recursion is too deep (over " + std::to_string(stack_budget >> 10) + " KiB of stack)");
    }
  }
  ~DepthGuard() { --depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int& depth_;
};

class Macro : public Callable {
 public:
  Macro(const Stmt& def, std::weak_ptr<Scope> closure) : def_(def), closure_(std::move(closure)) {}
  std::string name() const override { return def_.targets[0]; }
  Value call(Interpreter& interp, CallArgs args) override {
    auto closure = closure_.lock();
    if (!closure) throw Failure(Errc::internal, "macro '" + name() + "' outlived its template");
    return Value(interp.call_macro(def_, closure, std::move(args)));
  }

 private:
  const Stmt& def_;
  // Weak: the scope holds this macro, and the interpreter keeps the scope alive.
  std::weak_ptr<Scope> closure_;
};

// loop.cycle("odd", "even"): the argument at loop.index0, round-robin.
class Cycle : public Callable {
 public:
  explicit Cycle(size_t index0) : index0_(index0) {}
  std::string name() const override { return "loop.cycle"; }
  Value call(Interpreter&, CallArgs args) override {
    if (!args.named.empty()) throw Failure(Errc::invalid_argument, "loop.cycle takes no keyword arguments");
    if (args.positional.empty()) throw Failure(Errc::invalid_argument, "no items for cycling given");
    return args.positional[index0_ % args.positional.size()];
  }

 private:
  size_t index0_;
};

// loop.changed(value): true when the value differs from the one given on
// the previous call in this loop (one instance per loop, shared by iterations).
class Changed : public Callable {
 public:
  std::string name() const override { return "loop.changed"; }
  Value call(Interpreter&, CallArgs args) override {
    Value now = Value::tuple(std::move(args.positional));
    if (seen_ && equals(now, last_)) return Value(false);
    seen_ = true;
    last_ = std::move(now);
    return Value(true);
  }

 private:
  bool seen_ = false;
  Value last_;
};

Value loop_value(size_t i, const std::vector<Value>& items, const Value& changed) {
  const size_t n = items.size();
  auto num = [](size_t v) { return Value(static_cast<int64_t>(v)); };
  DictData d;
  d.items = {{Value("index"), num(i + 1)},       {Value("index0"), num(i)},
             {Value("revindex"), num(n - i)},    {Value("revindex0"), num(n - i - 1)},
             {Value("first"), Value(i == 0)},    {Value("last"), Value(i + 1 == n)},
             {Value("length"), num(n)},          {Value("depth"), num(1)},
             {Value("depth0"), num(0)}};
  if (i > 0) d.items.emplace_back(Value("previtem"), items[i - 1]);
  if (i + 1 < n) d.items.emplace_back(Value("nextitem"), items[i + 1]);
  d.items.emplace_back(Value("cycle"), Value::callable(std::make_shared<Cycle>(i)));
  d.items.emplace_back(Value("changed"), changed);
  return Value::dict(std::move(d));
}

}  // namespace

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent_.get()) {
    for (const auto& [n, v] : s->vars_) {
      if (n == name) return &v;
    }
  }
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  for (auto& [n, old] : vars_) {
    if (n == name) {
      old = std::move(v);
      return;
    }
  }
  vars_.emplace_back(name, std::move(v));
}

Interpreter::~Interpreter() {
  // A namespace can hold itself ({% set ns.me = ns %}); emptying them all
  // breaks such reference cycles once nothing can read them any more.
  for (const Value& ns : namespaces_) ns.as_ns().items.clear();
}

void Interpreter::own_namespace(const Value& ns) { namespaces_.push_back(ns); }

void Interpreter::step() {
  ++steps_;
  if (steps_ > kMaxSteps) {
    throw Failure(Errc::invalid_argument, "template ran too long: over " + std::to_string(kMaxSteps) +
                                              " steps (statements, expressions and loop iterations)");
  }
  if (steps_ % kClockEverySteps == 0 && std::chrono::steady_clock::now() > deadline_) {
    throw Failure(Errc::invalid_argument,
                  "template ran too long: over " +
                                              std::to_string(static_cast<int>(kMaxRenderSeconds * 1000)) + " ms");
  }
}

namespace {

// The lowest address of this thread's stack (0 where unknown), read once
// per thread: on the main thread glibc finds it by reading /proc/self/maps.
uintptr_t thread_stack_low() {
  thread_local const uintptr_t low = [] {
    uintptr_t found = 0;
#if defined(__GLIBC__)
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0) found = reinterpret_cast<uintptr_t>(addr);
      pthread_attr_destroy(&attr);
    }
#endif
    return found;
  }();
  return low;
}

// Stack a render starting at top may use: kMaxStackBytes, or half of what is
// left of this thread's stack if that is less.
size_t stack_budget(uintptr_t top) {
  const uintptr_t low = thread_stack_low();
  return low != 0 && top > low ? std::min(kMaxStackBytes, (top - low) / 2) : kMaxStackBytes;
}

}  // namespace

std::string Interpreter::render(const std::vector<std::pair<std::string, Value>>& variables) {
  // The statements, expressions and value functions (str, ==, ordering,
  // tojson) of this render keep to one stack bound.
  const auto stack_top = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  stack_budget_ = stack_budget(stack_top);
  struct FloorScope {
    uintptr_t saved;
    ~FloorScope() { set_render_stack_floor(saved); }
  } floor_scope{set_render_stack_floor(stack_top - stack_budget_)};
  deadline_ = std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(kMaxRenderSeconds));
  auto globals = std::make_shared<Scope>();
  for (auto& [name, fn] : global_functions()) globals->set(name, std::move(fn));
  auto top = std::make_shared<Scope>(globals);
  for (const auto& [name, v] : variables) top->set(name, v);
  std::string out;
  exec_body(tpl_.body, top, out);
  return out;
}

Value Interpreter::call(const Value& fn, CallArgs args) {
  if (fn.is_callable()) return fn.as_callable().call(*this, std::move(args));
  if (fn.is_undefined()) fail_undefined(fn);
  throw Failure(Errc::invalid_argument, "'" + type_name(fn) + "' object is not callable");
}

std::string Interpreter::call_macro(const Stmt& def, const std::shared_ptr<Scope>& closure, CallArgs args) {
  const std::string& name = def.targets[0];
  const auto& params = def.params;
  if (args.positional.size() > params.size() && !def.catch_varargs) {
    throw Failure(Errc::invalid_argument, "macro '" + name + "' takes not more than " +
                                              std::to_string(params.size()) + " argument(s)");
  }
  auto scope = std::make_shared<Scope>(closure);
  std::vector<bool> given(params.size(), false);
  std::vector<Value> varargs;
  DictData kwargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i >= params.size()) {
      varargs.push_back(std::move(args.positional[i]));
      continue;
    }
    scope->set(params[i].name, std::move(args.positional[i]));
    given[i] = true;
  }
  for (auto& [key, v] : args.named) {
    const std::string& wanted = key;  // a lambda may not capture a structured binding before C++20 in clang 14
    auto it = std::find_if(params.begin(), params.end(), [&](const MacroParam& p) { return p.name == wanted; });
    if (it == params.end() && def.catch_kwargs) {
      kwargs.set(Value(key), std::move(v));
      continue;
    }
    if (it == params.end()) {
      throw Failure(Errc::invalid_argument, "macro '" + name + "' takes no keyword argument '" + key + "'");
    }
    const auto i = static_cast<size_t>(it - params.begin());
    if (given[i]) throw Failure(Errc::invalid_argument, "macro '" + name + "' got multiple values for '" + key + "'");
    scope->set(key, std::move(v));
    given[i] = true;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (given[i]) continue;
    scope->set(params[i].name, params[i].default_value
                                   ? eval(*params[i].default_value, *scope)
                                   : Value::undefined("parameter '" + params[i].name + "' was not provided"));
  }
  if (def.catch_varargs) scope->set("varargs", Value::tuple(std::move(varargs)));
  if (def.catch_kwargs) scope->set("kwargs", Value::dict(std::move(kwargs)));
  std::string out;
  exec_body(def.body, scope, out);
  return out;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec(*s, scope, out);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

std::string Interpreter::capture(const Body& body, const std::shared_ptr<Scope>& scope) {
  std::string out;
  exec_body(body, std::make_shared<Scope>(scope), out);
  return out;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  try {
    DepthGuard guard(depth_, stack_budget_);
    step();
    Flow flow = Flow::normal;
    switch (s.kind) {
      case StmtKind::text: out += s.text; break;
      case StmtKind::output: out += to_str(eval(*s.expr, *scope)); break;
      case StmtKind::if_: {
        const Body* chosen = &s.else_body;
        for (const auto& [cond, body] : s.branches) {
          if (truthy(eval(*cond, *scope))) {
            chosen = &body;
            break;
          }
        }
        flow = exec_body(*chosen, scope, out);  // if does not open a scope
        break;
      }
      case StmtKind::for_: flow = exec_for(s, scope, out); break;
      case StmtKind::set: exec_set(s, *scope, eval(*s.expr, *scope)); break;
      case StmtKind::set_block: exec_set(s, *scope, apply_filters(s.filters, Value(capture(s.body, scope)), *scope)); break;
      case StmtKind::macro:
        scope->set(s.targets[0], Value::callable(std::make_shared<Macro>(s, scope)));
        macro_scopes_.push_back(scope);
        break;
      case StmtKind::filter_block: out += to_str(apply_filters(s.filters, Value(capture(s.body, scope)), *scope)); break;
      case StmtKind::with: {
        auto inner = std::make_shared<Scope>(scope);
        std::vector<Value> values;  // all evaluated in the outer scope first
        for (const auto& [name, e] : s.assigns) values.push_back(eval(*e, *scope));
        for (size_t i = 0; i < values.size(); ++i) inner->set(s.assigns[i].first, std::move(values[i]));
        flow = exec_body(s.body, inner, out);
        break;
      }
      case StmtKind::generation: flow = exec_body(s.body, std::make_shared<Scope>(scope), out); break;
      case StmtKind::break_: flow = Flow::break_; break;
      case StmtKind::continue_: flow = Flow::continue_; break;
    }
    if (out.size() > kMaxOutputBytes) {
      throw Failure(Errc::invalid_argument,
                    "template output is over the limit of " + std::to_string(kMaxOutputBytes) + " bytes");
    }
    return flow;
  } catch (const Failure& f) {
    throw Error(f.code(), at(s.pos, f.what()));
  }
}

void Interpreter::bind_targets(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
  if (targets.size() == 1) {
    scope.set(targets[0], v);
    return;
  }
  std::vector<Value> parts = iterate(v);
  if (parts.size() != targets.size()) {
    const std::string expected = std::to_string(targets.size());
    throw Failure(Errc::invalid_argument,
                  parts.size() < targets.size()
                      ? "not enough values to unpack (expected " + expected + ", got " + std::to_string(parts.size()) + ")"
                      : "too many values to unpack (expected " + expected + ")");
  }
  for (size_t i = 0; i < parts.size(); ++i) scope.set(targets[i], std::move(parts[i]));
}

void Interpreter::exec_set(const Stmt& s, Scope& scope, Value v) {
  if (s.attr.empty()) {
    bind_targets(s.targets, v, scope);
    return;
  }
  const Value* ns = scope.find(s.targets[0]);
  if (!ns || !ns->is_ns()) throw Failure(Errc::invalid_argument, "cannot assign attribute on non-namespace object");
  ns->as_ns().set(Value(s.attr), std::move(v));
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  std::vector<Value> items = iterate(eval(*s.expr, *scope));
  if (s.filter_cond) {  // `for x in xs if cond`: filtered first, so loop.length counts what is left
    std::vector<Value> kept;
    for (auto& item : items) {
      Scope probe(scope);
      bind_targets(s.targets, item, probe);
      if (truthy(eval(*s.filter_cond, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  // The else block is outside the loop: a break there belongs to an enclosing loop.
  if (items.empty()) return exec_body(s.else_body, std::make_shared<Scope>(scope), out);
  const Value changed = Value::callable(std::make_shared<Changed>());
  for (size_t i = 0; i < items.size(); ++i) {
    step();
    auto iteration = std::make_shared<Scope>(scope);  // fresh each time, as Jinja's loop frame
    bind_targets(s.targets, items[i], *iteration);
    iteration->set("loop", loop_value(i, items, changed));
    if (exec_body(s.body, iteration, out) == Flow::break_) break;
  }
  return Flow::normal;
}

Value Interpreter::apply_filters(const std::vector<ExprPtr>& filters, Value v, Scope& scope) {
  for (const auto& f : filters) {
    try {
      v = apply_filter(*this, f->name, std::move(v), eval_args(*f, 1, scope));
    } catch (const Failure& fail) {
      throw Error(fail.code(), at(f->pos, fail.what()));
    }
  }
  return v;
}

CallArgs Interpreter::eval_args(const Expr& e, size_t first, Scope& scope) {
  CallArgs args;
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i], scope));
  for (const auto& [name, x] : e.kwargs) args.named.emplace_back(name, eval(*x, scope));
  return args;
}

Value Interpreter::eval(const Expr& e, Scope& scope) {
  try {
    DepthGuard guard(depth_, stack_budget_);
    return eval_inner(e, scope);
  } catch (const Failure& f) {
    throw Error(f.code(), at(e.pos, f.what()));
  }
}

Value Interpreter::eval_inner(const Expr& e, Scope& scope) {
  switch (e.kind) {
    case ExprKind::literal: return e.value;
    case ExprKind::name: {
      const Value* v = scope.find(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::list:
    case ExprKind::tuple: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, scope));
      return Value::sequence(std::move(items), e.kind == ExprKind::tuple ? SeqKind::tuple : SeqKind::list);
    }
    case ExprKind::dict: {
      DictData d;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value key = eval(*e.args[i], scope);
        if (!hashable(key)) throw Failure(Errc::invalid_argument, "unhashable type: '" + type_name(key) + "'");
        d.set(std::move(key), eval(*e.args[i + 1], scope));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::attr: return get_attr(eval(*e.args[0], scope), e.name);
    case ExprKind::item: return get_item(eval(*e.args[0], scope), eval(*e.args[1], scope));
    case ExprKind::slice: {
      Value obj = eval(*e.args[0], scope);
      auto bound = [&](size_t i) { return e.args[i] ? eval(*e.args[i], scope) : Value::none(); };
      return get_slice(obj, bound(1), bound(2), bound(3));
    }
    case ExprKind::call: {
      Value fn = eval(*e.args[0], scope);
      return call(fn, eval_args(e, 1, scope));
    }
    case ExprKind::filter: {
      Value input = eval(*e.args[0], scope);
      return apply_filter(*this, e.name, std::move(input), eval_args(e, 1, scope));
    }
    case ExprKind::test: {
      Value input = eval(*e.args[0], scope);
      const bool r = apply_test(*this, e.name, input, eval_args(e, 1, scope));
      return Value(e.negated ? !r : r);
    }
    case ExprKind::unary: return unary_op(e.op, eval(*e.args[0], scope));
    case ExprKind::binary: {
      Value a = eval(*e.args[0], scope);
      if (e.op == Op::and_) return truthy(a) ? eval(*e.args[1], scope) : a;
      if (e.op == Op::or_) return truthy(a) ? a : eval(*e.args[1], scope);
      return binary_op(e.op, a, eval(*e.args[1], scope));
    }
    case ExprKind::compare: {
      Value left = eval(*e.args[0], scope);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.args[i + 1], scope);
        if (!compare_op(e.ops[i], left, right)) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::conditional:
      if (truthy(eval(*e.args[1], scope))) return eval(*e.args[0], scope);
      if (e.args[2]) return eval(*e.args[2], scope);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
  }
  return Value();
}

}  // namespace troupe::jinja
