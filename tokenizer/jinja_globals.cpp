// Global functions and tests of the template language, and Python-style
// argument binding for every builtin. The globals are those transformers
// gives chat templates: range, dict, namespace, raise_exception and
// strftime_now (Jinja's lipsum, cycler and joiner are refused by name).
#include <algorithm>
#include <ctime>

#include "tokenizer/jinja_builtins.hpp"
#include "tokenizer/jinja_eval.hpp"
#include "tokenizer/jinja_limits.hpp"
#include "tokenizer/jinja_ops.hpp"
#include "tokenizer/jinja_parser.hpp"
#include "tokenizer/jinja_text.hpp"

namespace troupe::jinja {

BoundArgs::BoundArgs(std::string_view fn, CallArgs args, std::initializer_list<std::string_view> params,
                     size_t required, bool varargs)
    : fn_(fn), values_(params.size()) {
  const std::vector<std::string_view> names(params);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < names.size()) {
      values_[i] = std::move(args.positional[i]);
    } else if (varargs) {
      rest_.push_back(std::move(args.positional[i]));
    } else {
      throw Failure(Errc::invalid_argument, fn_ + "() takes at most " + std::to_string(names.size()) +
                                                " argument(s) (" + std::to_string(args.positional.size()) + " given)");
    }
  }
  for (auto& [key, v] : args.named) {
    auto it = std::find(names.begin(), names.end(), key);
    if (it == names.end()) {
      if (!varargs) throw Failure(Errc::invalid_argument, fn_ + "() got an unexpected keyword argument '" + key + "'");
      rest_named_.emplace_back(key, std::move(v));
      continue;
    }
    auto& slot = values_[static_cast<size_t>(it - names.begin())];
    if (slot) throw Failure(Errc::invalid_argument, fn_ + "() got multiple values for argument '" + key + "'");
    slot = std::move(v);
  }
  for (size_t i = 0; i < required && i < names.size(); ++i) {
    if (!values_[i]) {
      throw Failure(Errc::invalid_argument, fn_ + "() missing required argument '" + std::string(names[i]) + "'");
    }
  }
}

const Value& BoundArgs::operator[](size_t i) const { return values_[i] ? *values_[i] : undefined_; }

int64_t BoundArgs::int_at(size_t i, int64_t fallback) const {
  if (!has(i)) return fallback;
  const Value& v = *values_[i];
  if (!v.is_int() && !v.is_bool()) {
    throw Failure(Errc::invalid_argument, fn_ + "(): expected an integer argument, got " + type_name(v));
  }
  return v.as_int();
}

std::string BoundArgs::string_at(size_t i, std::string fallback) const {
  if (!has(i)) return fallback;
  const Value& v = *values_[i];
  if (!v.is_string()) throw Failure(Errc::invalid_argument, fn_ + "(): expected a string argument, got " + type_name(v));
  return v.as_string();
}

namespace {

// ---- tests

using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

template <Op op>
bool t_compare(Interpreter&, const Value& v, CallArgs& args) {
  BoundArgs a("test", std::move(args), {"other"}, 1);
  return compare_op(op, v, a[0]);
}

bool no_args(const char* name, CallArgs& args) {
  BoundArgs a(name, std::move(args), {});
  return true;
}

bool is_iterable(const Value& v) {
  return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined();
}

const std::pair<std::string_view, TestFn> kTests[] = {
    {"defined", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("defined", a) && !v.is_undefined(); }},
    {"undefined", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("undefined", a) && v.is_undefined(); }},
    {"none", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("none", a) && v.is_none(); }},
    {"boolean", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("boolean", a) && v.is_bool(); }},
    {"true", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("true", a) && v.is_bool() && v.as_bool(); }},
    {"false", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("false", a) && v.is_bool() && !v.as_bool(); }},
    {"integer", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("integer", a) && v.is_int(); }},
    {"float", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("float", a) && v.is_float(); }},
    {"number", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("number", a) && v.is_number(); }},
    {"string", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("string", a) && v.is_string(); }},
    {"mapping", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("mapping", a) && v.is_dict(); }},
    {"iterable", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("iterable", a) && is_iterable(v); }},
    {"sequence", [](Interpreter&, const Value& v, CallArgs& a) {
       return no_args("sequence", a) && is_iterable(v) && !(v.is_sequence() && v.as_seq().kind == SeqKind::iterator);
     }},
    {"callable", [](Interpreter&, const Value& v, CallArgs& a) { return no_args("callable", a) && v.is_callable(); }},
    {"sameas", [](Interpreter&, const Value& v, CallArgs& args) {
       BoundArgs a("sameas", std::move(args), {"other"}, 1);
       const Value& o = a[0];
       if (v.kind() != o.kind()) return false;
       if (v.identity() || o.identity()) return v.identity() == o.identity();
       return equals(v, o);  // None, True, False, small ints and equal literals are the same object in CPython
     }},
    {"eq", t_compare<Op::eq>}, {"equalto", t_compare<Op::eq>}, {"==", t_compare<Op::eq>},
    {"ne", t_compare<Op::ne>}, {"!=", t_compare<Op::ne>},
    {"lt", t_compare<Op::lt>}, {"lessthan", t_compare<Op::lt>}, {"<", t_compare<Op::lt>},
    {"le", t_compare<Op::le>}, {"<=", t_compare<Op::le>},
    {"gt", t_compare<Op::gt>}, {"greaterthan", t_compare<Op::gt>}, {">", t_compare<Op::gt>},
    {"ge", t_compare<Op::ge>}, {">=", t_compare<Op::ge>},
    {"in", [](Interpreter&, const Value& v, CallArgs& args) {
       BoundArgs a("in", std::move(args), {"seq"}, 1);
       return contains(a[0], v);
     }},
    {"odd", [](Interpreter&, const Value& v, CallArgs& a) {
       return no_args("odd", a) && equals(binary_op(Op::mod, v, Value(2)), Value(1));
     }},
    {"even", [](Interpreter&, const Value& v, CallArgs& a) {
       return no_args("even", a) && equals(binary_op(Op::mod, v, Value(2)), Value(0));
     }},
    {"divisibleby", [](Interpreter&, const Value& v, CallArgs& args) {
       BoundArgs a("divisibleby", std::move(args), {"num"}, 1);
       return equals(binary_op(Op::mod, v, a[0]), Value(0));
     }},
    {"lower", [](Interpreter& interp, const Value& v, CallArgs& a) {
       no_args("lower", a);
       return truthy(interp.call(get_attr(Value(to_str(v)), "islower"), {}));  // str.islower()
     }},
    {"upper", [](Interpreter& interp, const Value& v, CallArgs& a) {
       no_args("upper", a);
       return truthy(interp.call(get_attr(Value(to_str(v)), "isupper"), {}));  // str.isupper()
     }},
    {"filter", [](Interpreter&, const Value& v, CallArgs& a) {
       return no_args("filter", a) && v.is_string() && has_filter(v.as_string());
     }},
    {"test", [](Interpreter&, const Value& v, CallArgs& a) {
       return no_args("test", a) && v.is_string() && has_test(v.as_string());
     }},
};

// ---- global functions

using GlobalFn = Value (*)(Interpreter&, CallArgs);

class Builtin : public Callable {
 public:
  Builtin(std::string name, GlobalFn fn) : name_(std::move(name)), fn_(fn) {}
  std::string name() const override { return name_; }
  Value call(Interpreter& interp, CallArgs args) override { return fn_(interp, std::move(args)); }

 private:
  std::string name_;
  GlobalFn fn_;
};


Value g_range(Interpreter&, CallArgs args) {
  BoundArgs a("range", std::move(args), {"start", "stop", "step"}, 1);
  int64_t start = 0, stop = 0, step = a.int_at(2, 1);
  if (a.has(1)) {
    start = a.int_at(0, 0);
    stop = a.int_at(1, 0);
  } else {
    stop = a.int_at(0, 0);
  }
  if (step == 0) throw Failure(Errc::invalid_argument, "range() arg 3 must not be zero");
  std::vector<Value> items;
  // The add is checked: range(2**63 - 3, 2**63 - 1, 5) must stop, not wrap.
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (static_cast<int64_t>(items.size()) >= kMaxRangeItems) {
      throw Failure(Errc::invalid_argument,
                    "range too big: chat templates may make at most " + std::to_string(kMaxRangeItems) + " items");
    }
    items.emplace_back(i);
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  return Value::range(std::move(items), start, stop, step);
}

// dict(mapping or pairs, **kwargs) and namespace(...) share the argument rules.
DictData mapping_from(const char* fn, CallArgs& args) {
  DictData d;
  if (args.positional.size() > 1) {
    throw Failure(Errc::invalid_argument, std::string(fn) + "() takes at most 1 positional argument");
  }
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      d = src.as_dict();
    } else if (src.is_ns()) {
      d = src.as_ns();
    } else {
      for (const Value& pair : iterate(src)) {
        std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) throw Failure(Errc::invalid_argument, std::string(fn) + "(): sequence elements must be pairs");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : args.named) d.set(Value(k), std::move(v));
  return d;
}

Value g_dict(Interpreter&, CallArgs args) { return Value::dict(mapping_from("dict", args)); }

Value g_namespace(Interpreter& interp, CallArgs args) {
  DictData d = mapping_from("namespace", args);
  for (const auto& kv : d.items) {
    if (kv.first.is_string() && !kv.first.as_string().empty() && kv.first.as_string()[0] == '_') {
      throw Failure(Errc::invalid_argument, "namespace attributes may not start with '_': " + repr(kv.first));
    }
  }
  Value ns = Value::ns(std::move(d));
  interp.own_namespace(ns);
  return ns;
}

Value g_raise_exception(Interpreter&, CallArgs args) {
  BoundArgs a("raise_exception", std::move(args), {"message"}, 1);
  throw Failure(Errc::invalid_argument, to_str(a[0]));
}

Value g_strftime_now(Interpreter&, CallArgs args) {
  BoundArgs a("strftime_now", std::move(args), {"format"}, 1);
  const std::string format = a.string_at(0, "");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  for (size_t size = 256; size <= 65536; size *= 4) {
    std::string buf(size, '\0');
    const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &local);
    if (n > 0 || format.empty()) return Value(buf.substr(0, n));
  }
  return Value(std::string());  // a format whose output is empty
}

template <const char* kName>
Value g_unsupported(Interpreter&, CallArgs) {
  throw Failure(Errc::unsupported, std::string("the function ") + kName + "() is not supported");
}
constexpr char kLipsum[] = "lipsum";
constexpr char kCycler[] = "cycler";
constexpr char kJoiner[] = "joiner";

}  // namespace

bool has_test(std::string_view name) {
  return std::any_of(std::begin(kTests), std::end(kTests), [&](const auto& t) { return t.first == name; });
}

bool apply_test(Interpreter& interp, std::string_view name, const Value& input, CallArgs args) {
  for (const auto& [n, fn] : kTests) {
    if (n == name) return fn(interp, input, args);
  }
  throw Failure(Errc::unsupported, "the test '" + std::string(name) + "' is not supported");
}

std::vector<std::pair<std::string, Value>> global_functions() {
  std::vector<std::pair<std::string, Value>> out;
  auto add = [&](const char* name, GlobalFn fn) {
    out.emplace_back(name, Value::callable(std::make_shared<Builtin>(name, fn)));
  };
  add("range", g_range);
  add("dict", g_dict);
  add("namespace", g_namespace);
  add("raise_exception", g_raise_exception);
  add("strftime_now", g_strftime_now);
  add(kLipsum, g_unsupported<kLipsum>);
  add(kCycler, g_unsupported<kCycler>);
  add(kJoiner, g_unsupported<kJoiner>);
  return out;
}

}  // namespace troupe::jinja
