// Operators and lookups with Python semantics (see jinja_ops.hpp). Integer
// arithmetic is int64 with overflow reported, where Python would grow.
#include "tokenizer/jinja_ops.hpp"

#include <cmath>
#include <limits>

#include "tokenizer/jinja_builtins.hpp"
#include "tokenizer/jinja_text.hpp"

namespace troupe::jinja {
namespace {

constexpr size_t kMaxRepeat = size_t{1} << 26;  // bytes or items a `*` repetition may make

[[noreturn]] void bad_operands(const char* op, const Value& a, const Value& b) {
  throw Failure(Errc::invalid_argument, std::string("unsupported operand type(s) for ") + op + ": '" +
                                            type_name(a) + "' and '" + type_name(b) + "'");
}

[[noreturn]] void overflow() { throw Failure(Errc::invalid_argument, "integer result does not fit in 64 bits"); }


// Python's float divmod: the remainder takes the divisor's sign.
std::pair<double, double> float_divmod(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, b);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, a / b);
  }
  return {floordiv, mod};
}

Value int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if ((exp & 1) && __builtin_mul_overflow(result, base, &result)) overflow();
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
  }
  return Value(result);
}

Value repeat(const Value& seq, int64_t times) {
  if (times <= 0) return seq.is_string() ? Value(std::string()) : Value::sequence({}, seq.as_seq().kind);
  const size_t unit = seq.is_string() ? seq.as_string().size() : seq.as_seq().items.size();
  if (unit == 0) return seq;  // '' * 10**12 is '' at once
  if (static_cast<uint64_t>(times) > kMaxRepeat / unit) {
    throw Failure(Errc::invalid_argument, "repetition result is too large");
  }
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.as_seq().items.begin(), seq.as_seq().items.end());
  return Value::sequence(std::move(out), seq.as_seq().kind);
}

bool is_int_like(const Value& v) { return v.is_int() || v.is_bool(); }

Value arithmetic(Op op, const Value& a, const Value& b) {
  const bool as_float = a.is_float() || b.is_float();
  int64_t r = 0;
  const char* sym = "+";
  switch (op) {
    case Op::add:
      if (as_float) return Value(a.as_float() + b.as_float());
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) overflow();
      return Value(r);
    case Op::sub:
      if (as_float) return Value(a.as_float() - b.as_float());
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) overflow();
      return Value(r);
    case Op::mul:
      if (as_float) return Value(a.as_float() * b.as_float());
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) overflow();
      return Value(r);
    case Op::div:
      if (b.as_float() == 0.0) throw Failure(Errc::invalid_argument, "division by zero");
      return Value(a.as_float() / b.as_float());
    case Op::floordiv:
    case Op::mod: {
      sym = op == Op::mod ? "%" : "//";
      if (as_float) {
        if (b.as_float() == 0.0) throw Failure(Errc::invalid_argument, std::string("float ") + sym + " by zero");
        auto [fq, fr] = float_divmod(a.as_float(), b.as_float());
        return Value(op == Op::mod ? fr : fq);
      }
      const int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) throw Failure(Errc::invalid_argument, "integer division or modulo by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) {
        if (op == Op::mod) return Value(int64_t{0});
        overflow();
      }
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {  // floor toward negative infinity
        --q;
        m += y;
      }
      return Value(op == Op::mod ? m : q);
    }
    case Op::pow: {
      if (!as_float && b.as_int() >= 0) return int_pow(a.as_int(), b.as_int());
      const double x = a.as_float(), y = b.as_float();
      if (x == 0.0 && y < 0) throw Failure(Errc::invalid_argument, "0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y)) {
        throw Failure(Errc::unsupported, "a negative number to a fractional power (a complex number)");
      }
      const double p = std::pow(x, y);
      // Python's float ** raises where the result overflows (its * and + give inf).
      if (std::isinf(p) && std::isfinite(x) && std::isfinite(y)) {
        throw Failure(Errc::invalid_argument, "(34, 'Numerical result out of range')");
      }
      return Value(p);
    }
    default: break;
  }
  bad_operands(sym, a, b);
}

int64_t slice_bound(const Value& v) {
  if (is_int_like(v)) return v.as_int();
  throw Failure(Errc::invalid_argument, "slice indices must be integers or None");
}

}  // namespace

Value binary_op(Op op, const Value& a, const Value& b) {
  if (op == Op::concat) return Value(to_str(a) + to_str(b));
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  static const char* const kSymbols[] = {"+", "-", "*", "/", "//", "%", "**"};
  const char* sym = static_cast<size_t>(op) < 7 ? kSymbols[static_cast<size_t>(op)] : "?";
  if (op == Op::add) {
    if (a.is_string() && b.is_string()) return Value(a.as_string() + b.as_string());
    if (a.is_list_or_tuple() && b.is_list_or_tuple() && a.as_seq().kind == b.as_seq().kind) {
      std::vector<Value> items = a.as_seq().items;
      items.insert(items.end(), b.as_seq().items.begin(), b.as_seq().items.end());
      return Value::sequence(std::move(items), a.as_seq().kind);
    }
  }
  if (op == Op::mul) {
    if ((a.is_string() || a.is_list_or_tuple()) && is_int_like(b)) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list_or_tuple()) && is_int_like(a)) return repeat(b, a.as_int());
  }
  if (op == Op::mod && a.is_string()) throw Failure(Errc::unsupported, "printf-style string formatting with '%'");
  bad_operands(sym, a, b);
}

Value unary_op(Op op, const Value& a) {
  if (op == Op::not_) return Value(!truthy(a));
  if (a.is_undefined()) fail_undefined(a);
  if (!a.is_number()) {
    throw Failure(Errc::invalid_argument, std::string("bad operand type for unary ") + (op == Op::neg ? "-" : "+") +
                                              ": '" + type_name(a) + "'");
  }
  if (op == Op::pos) return a.is_float() ? a : Value(a.as_int());
  if (a.is_float()) return Value(-a.as_float());
  if (a.as_int() == std::numeric_limits<int64_t>::min()) overflow();
  return Value(-a.as_int());
}

bool compare_op(Op op, const Value& a, const Value& b) {
  switch (op) {
    case Op::eq: return equals(a, b);
    case Op::ne: return !equals(a, b);
    case Op::in: return contains(b, a);
    case Op::not_in: return !contains(b, a);
    default: break;
  }
  if (a.is_number() && b.is_number() && (a.is_float() || b.is_float())) {
    const double x = a.as_float(), y = b.as_float();  // direct, so NaN compares false as in Python
    switch (op) {
      case Op::lt: return x < y;
      case Op::le: return x <= y;
      case Op::gt: return x > y;
      default: return x >= y;
    }
  }
  const int c = compare(a, b);
  switch (op) {
    case Op::lt: return c < 0;
    case Op::le: return c <= 0;
    case Op::gt: return c > 0;
    default: return c >= 0;
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::undefined: return false;  // Undefined iterates as empty
    case Value::Kind::string:
      if (!item.is_string()) {
        throw Failure(Errc::invalid_argument,
                      "'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::dict:
      if (!hashable(item)) throw Failure(Errc::invalid_argument, "unhashable type: '" + type_name(item) + "'");
      return container.as_dict().find(item) != nullptr;
    case Value::Kind::sequence: {
      const SeqData& s = container.as_seq();
      const size_t from = s.kind == SeqKind::iterator ? s.cursor : 0;
      for (size_t i = from; i < s.items.size(); ++i) {
        if (equals(s.items[i], item)) {
          if (s.kind == SeqKind::iterator) s.cursor = i + 1;  // a generator is read up to the match
          return true;
        }
      }
      if (s.kind == SeqKind::iterator) s.cursor = s.items.size();
      return false;
    }
    default:
      throw Failure(Errc::invalid_argument, "argument of type '" + type_name(container) + "' is not iterable");
  }
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (auto m = bound_method(obj, name)) return *m;
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(Value(name))) return *v;
  } else if (obj.is_ns()) {
    if (const Value* v = obj.as_ns().find(Value(name))) return *v;
  }
  return Value::undefined(text::cat({"'", type_name(obj), " object' has no attribute '", name, "'"}));
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(key)) return *v;
  } else if (is_int_like(key) && (obj.is_string() || (obj.is_sequence() && (obj.is_list_or_tuple() ||
                                                                           obj.as_seq().kind == SeqKind::range)))) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      std::u32string cps = text::decode(obj.as_string());
      const auto n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value(text::encode(std::u32string(1, cps[static_cast<size_t>(i)])));
    } else {
      const auto& items = obj.as_seq().items;
      const auto n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return items[static_cast<size_t>(i)];
    }
    return Value::undefined(text::cat({"'", type_name(obj), " object' has no element ", std::to_string(key.as_int())}));
  }
  if (key.is_string()) return get_attr(obj, key.as_string());
  return Value::undefined(text::cat({"'", type_name(obj), " object' has no element ", repr(key)}));
}

Value get_slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) fail_undefined(obj);
  auto absent = [](const Value& v) { return v.is_undefined() || v.is_none(); };
  const int64_t step = absent(step_v) ? 1 : slice_bound(step_v);
  if (step == 0) throw Failure(Errc::invalid_argument, "slice step cannot be zero");
  const bool is_str = obj.is_string();
  // Jinja compiles a slice to Python's own subscript, so unlike other lookups
  // it fails on what cannot be sliced instead of giving Undefined.
  if (obj.is_dict()) throw Failure(Errc::invalid_argument, "unhashable type: 'slice'");
  if (!is_str && !(obj.is_sequence() && (obj.is_list_or_tuple() || obj.as_seq().kind == SeqKind::range))) {
    throw Failure(Errc::invalid_argument, text::cat({"'", type_name(obj), "' object is not subscriptable"}));
  }
  std::u32string cps = is_str ? text::decode(obj.as_string()) : std::u32string();
  const auto n = static_cast<int64_t>(is_str ? cps.size() : obj.as_seq().items.size());
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](const Value& v, int64_t fallback) {
    if (absent(v)) return fallback;
    int64_t i = slice_bound(v);
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t start = adjust(start_v, step < 0 ? n - 1 : 0);
  const int64_t stop = adjust(stop_v, step < 0 ? -1 : n);
  std::u32string out_cps;
  std::vector<Value> out_items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (is_str) {
      out_cps.push_back(cps[static_cast<size_t>(i)]);
    } else {
      out_items.push_back(obj.as_seq().items[static_cast<size_t>(i)]);
    }
    if (__builtin_add_overflow(i, step, &i)) break;  // a huge step leaves the bounds at once
  }
  if (is_str) return Value(text::encode(out_cps));
  if (obj.as_seq().kind == SeqKind::range) {  // a range's slice is a range, as in Python
    const SeqData& r = obj.as_seq();
    auto at = [&](int64_t index) {  // r.range_start + index * r.range_step, checked
      int64_t v = 0;
      if (__builtin_mul_overflow(index, r.range_step, &v) || __builtin_add_overflow(v, r.range_start, &v)) overflow();
      return v;
    };
    int64_t new_step = 0;
    if (__builtin_mul_overflow(r.range_step, step, &new_step)) overflow();
    return Value::range(std::move(out_items), at(start), at(stop), new_step);
  }
  const SeqKind kind = obj.as_seq().kind == SeqKind::tuple ? SeqKind::tuple : SeqKind::list;
  return Value::sequence(std::move(out_items), kind);
}

Value get_path(const Value& obj, const std::string& path) {
  Value cur = obj;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && part.size() <= 18 && part.find_first_not_of("0123456789") == std::string::npos;
    cur = digits ? get_item(cur, Value(static_cast<int64_t>(std::stoll(part)))) : get_item(cur, Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

}  // namespace troupe::jinja
