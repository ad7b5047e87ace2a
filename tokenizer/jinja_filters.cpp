// Jinja's builtin filters as Jinja 3.1 defines them, with transformers'
// tojson (json.dumps, ensure_ascii off, no HTML escaping). Filters that
// return generators in Jinja (map, select, items, unique, reverse) return
// one-pass iterator values here too, so truthiness and printing match.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "tokenizer/jinja_builtins.hpp"
#include "tokenizer/jinja_eval.hpp"
#include "tokenizer/jinja_json.hpp"
#include "tokenizer/jinja_ops.hpp"
#include "tokenizer/jinja_parser.hpp"
#include "tokenizer/jinja_text.hpp"

namespace troupe::jinja {
namespace {

using FilterFn = Value (*)(Interpreter&, Value, CallArgs);

Value iterator_of(std::vector<Value> items) { return Value::sequence(std::move(items), SeqKind::iterator); }

std::optional<std::string> opt_str(const BoundArgs& a, size_t i) {
  if (!a.has(i) || a[i].is_none()) return std::nullopt;
  return to_str(a[i]);
}

// Sort and comparison key: the attribute if asked, lower-cased strings
// unless case_sensitive (Jinja's ignore_case).
Value sort_key(const Value& item, const std::optional<std::string>& attribute, bool case_sensitive) {
  Value k = attribute ? get_path(item, *attribute) : item;
  if (!case_sensitive && k.is_string()) return Value(text::lower(k.as_string()));
  return k;
}

// An indentation of `width` spaces; absurd widths are refused rather than
// allocated (the template is untrusted).
std::string spaces(int64_t width, const char* filter) {
  if (width > 1024) throw Failure(Errc::unsupported, std::string(filter) + "(): indent wider than 1024 spaces");
  return std::string(static_cast<size_t>(std::max<int64_t>(0, width)), ' ');
}

Value f_trim(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("trim", std::move(args), {"chars"});
  return Value(text::strip(to_str(v), opt_str(a, 0), true, true));
}

Value f_length(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("length", std::move(args), {});
  switch (v.kind()) {
    case Value::Kind::undefined: return Value(int64_t{0});
    case Value::Kind::string: return Value(static_cast<int64_t>(text::length(v.as_string())));
    case Value::Kind::dict: return Value(static_cast<int64_t>(v.as_dict().items.size()));
    case Value::Kind::sequence:
      if (v.as_seq().kind != SeqKind::iterator) return Value(static_cast<int64_t>(v.as_seq().items.size()));
      break;
    default: break;
  }
  throw Failure(Errc::invalid_argument, "object of type '" + type_name(v) + "' has no len()");
}

Value f_tojson(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("tojson", std::move(args), {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = a.bool_at(0, false);
  if (a.has(1) && !a[1].is_none()) {
    if (a[1].is_string()) {
      o.indent = a[1].as_string();
    } else if (a[1].is_int() || a[1].is_bool()) {
      o.indent = spaces(a[1].as_int(), "tojson");
    } else {
      throw Failure(Errc::invalid_argument, "tojson(): indent must be an int or a string");
    }
  }
  if (a.has(2) && !a[2].is_none()) {
    std::vector<Value> seps = a[2].is_list_or_tuple() ? a[2].as_seq().items : std::vector<Value>();
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) {
      throw Failure(Errc::invalid_argument, "tojson(): separators must be a pair of strings");
    }
    o.item_separator = seps[0].as_string();
    o.key_separator = seps[1].as_string();
  }
  o.sort_keys = a.bool_at(3, false);
  return Value(to_json(v, o));
}

Value f_items(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("items", std::move(args), {});
  if (v.is_undefined()) return iterator_of({});
  if (!v.is_dict()) throw Failure(Errc::invalid_argument, "Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.as_dict().items) out.push_back(Value::tuple({k, x}));
  return iterator_of(std::move(out));
}

Value f_first(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("first", std::move(args), {});
  if (v.is_sequence() && v.as_seq().kind == SeqKind::iterator) {  // next(iter(gen)) takes one item
    const SeqData& s = v.as_seq();
    if (s.cursor < s.items.size()) return s.items[s.cursor++];
  } else {
    std::vector<Value> items = iterate(v);
    if (!items.empty()) return items.front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value f_last(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("last", std::move(args), {});
  if (v.is_sequence() && v.as_seq().kind == SeqKind::iterator) {
    throw Failure(Errc::invalid_argument, "'generator' object is not reversible");
  }
  std::vector<Value> items = iterate(v);
  if (!items.empty()) return items.back();
  return Value::undefined("No last item, sequence was empty.");
}

Value f_join(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("join", std::move(args), {"d", "attribute"});
  const std::string sep = a.has(0) ? to_str(a[0]) : "";
  const auto attribute = opt_str(a, 1);
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(attribute ? get_path(item, *attribute) : item);
  }
  return Value(std::move(out));
}

template <std::string (*kMap)(std::string_view)>
Value f_case(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("case filter", std::move(args), {});
  return Value(kMap(to_str(v)));
}

// Jinja's title: each run between "-", whitespace, "(", "{", "[" or "<"
// gets an upper-case first letter and lower-case rest.
std::string jinja_title(std::string_view s) {
  std::u32string cps = text::decode(s);
  bool word_start = true;
  std::string out;
  for (char32_t c : cps) {
    const bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || text::is_space(c);
    const std::string one = text::encode(std::u32string(1, c));
    out += sep ? one : (word_start ? text::upper(one) : text::lower(one));
    word_start = sep;
  }
  return out;
}

Value f_title(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("title", std::move(args), {});
  return Value(jinja_title(to_str(v)));
}

Value f_replace(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("replace", std::move(args), {"old", "new", "count"}, 2);
  const int64_t count = a.has(2) && !a[2].is_none() ? a.int_at(2, -1) : -1;
  return Value(text::replace(to_str(v), to_str(a[0]), to_str(a[1]), count));
}

Value f_string(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("string", std::move(args), {});
  return Value(to_str(v));
}

std::optional<int64_t> float_to_int(double d) {
  if (std::isnan(d)) return std::nullopt;
  if (std::isinf(d) || std::fabs(d) >= 9.2e18) {
    throw Failure(Errc::invalid_argument, "cannot convert float to a 64-bit integer");
  }
  return static_cast<int64_t>(std::trunc(d));
}

Value f_int(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("int", std::move(args), {"default", "base"});
  if (v.is_undefined()) fail_undefined(v);  // Undefined's __int__ raises in Jinja
  const Value fallback = a.get_or(0, Value(int64_t{0}));
  const int64_t base = a.int_at(1, 10);
  if (base < 2 || base > 36) throw Failure(Errc::invalid_argument, "int(): base must be between 2 and 36");
  std::optional<int64_t> r;
  if (v.is_int() || v.is_bool()) r = v.as_int();
  else if (v.is_float()) r = float_to_int(v.as_float());
  else if (v.is_string()) {
    r = text::parse_int(v.as_string(), base);
    if (!r) {
      if (auto d = text::parse_float(v.as_string())) r = float_to_int(*d);
    }
  }
  return r ? Value(*r) : fallback;
}

Value f_float(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("float", std::move(args), {"default"});
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    if (auto d = text::parse_float(v.as_string())) return Value(*d);
  }
  return a.get_or(0, Value(0.0));
}

Value f_default(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("default", std::move(args), {"default_value", "boolean"});
  if (v.is_undefined() || (a.bool_at(1, false) && !truthy(v))) return a.get_or(0, Value(std::string()));
  return v;
}

Value f_list(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("list", std::move(args), {});
  return Value::sequence(iterate(v));
}

Value f_reverse(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("reverse", std::move(args), {});
  if (v.is_string()) {
    std::u32string cps = text::decode(v.as_string());
    std::reverse(cps.begin(), cps.end());
    return Value(text::encode(cps));
  }
  const bool one_pass = v.is_sequence() && v.as_seq().kind == SeqKind::iterator;
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  // reversed() of a list is an iterator; a generator cannot be reversed, so Jinja builds a list.
  return one_pass ? Value::sequence(std::move(items)) : iterator_of(std::move(items));
}

Value f_sort(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("sort", std::move(args), {"reverse", "case_sensitive", "attribute"});
  const bool reverse = a.bool_at(0, false), case_sensitive = a.bool_at(1, false);
  const auto attribute = opt_str(a, 2);
  std::vector<Value> items = iterate(v);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(sort_key(items[i], attribute, case_sensitive), i);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? compare(y.first, x.first) < 0 : compare(x.first, y.first) < 0;
  });
  std::vector<Value> out;
  for (const auto& k : keyed) out.push_back(items[k.second]);
  return Value::sequence(std::move(out));
}

Value f_unique(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("unique", std::move(args), {"case_sensitive", "attribute"});
  const bool case_sensitive = a.bool_at(0, false);
  const auto attribute = opt_str(a, 1);
  std::vector<Value> out, seen;
  for (const Value& item : iterate(v)) {
    Value k = sort_key(item, attribute, case_sensitive);
    if (!hashable(k)) throw Failure(Errc::invalid_argument, "unhashable type: '" + type_name(k) + "'");  // Jinja keeps a set
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); })) continue;
    seen.push_back(std::move(k));
    out.push_back(item);
  }
  return iterator_of(std::move(out));
}

Value f_dictsort(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("dictsort", std::move(args), {"case_sensitive", "by", "reverse"});
  const bool case_sensitive = a.bool_at(0, false), reverse = a.bool_at(2, false);
  const std::string by = a.string_at(1, "key");
  if (by != "key" && by != "value") {
    throw Failure(Errc::invalid_argument, "You can only sort by either \"key\" or \"value\"");
  }
  if (!v.is_dict()) throw Failure(Errc::invalid_argument, "dictsort(): expected a mapping, got " + type_name(v));
  std::vector<std::pair<Value, Value>> items = v.as_dict().items;
  auto key = [&](const std::pair<Value, Value>& kv) {
    return sort_key(by == "key" ? kv.first : kv.second, std::nullopt, case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
    return reverse ? compare(key(y), key(x)) < 0 : compare(key(x), key(y)) < 0;
  });
  std::vector<Value> out;
  for (auto& [k, x] : items) out.push_back(Value::tuple({k, x}));
  return Value::sequence(std::move(out));
}

Value f_abs(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("abs", std::move(args), {});
  if (!v.is_number()) throw Failure(Errc::invalid_argument, "bad operand type for abs(): '" + type_name(v) + "'");
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  return v.as_int() < 0 ? unary_op(Op::neg, v) : Value(v.as_int());
}

// Python's round(x, n) on a float: exact decimal rounding, ties to even.
double round_float(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n >= 0) {
    if (n > 300) return x;
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(n), x);
    return std::strtod(buf, nullptr);
  }
  const double scale = std::pow(10.0, static_cast<double>(-n));
  return std::nearbyint(x / scale) * scale;
}

// Python's round(int, n): exact; n < 0 rounds to a multiple of 10**-n, ties to even.
int64_t round_int(int64_t x, int64_t n) {
  if (n >= 0) return x;
  if (n < -18) {  // 10**19 and up: |x| <= 5 * 10**18 rounds to 0, more would not fit
    if (n == -19 && (x > 5'000'000'000'000'000'000 || x < -5'000'000'000'000'000'000)) {
      throw Failure(Errc::invalid_argument, "round(): result does not fit in 64 bits");
    }
    return 0;
  }
  int64_t p = 1;
  for (int64_t i = 0; i < -n; ++i) p *= 10;
  int64_t q = x / p, r = x % p;
  if (r < 0) {  // floor division
    --q;
    r += p;
  }
  if (2 * r > p || (2 * r == p && (q % 2) != 0)) ++q;
  int64_t out = 0;
  if (__builtin_mul_overflow(q, p, &out)) throw Failure(Errc::invalid_argument, "round(): result does not fit in 64 bits");
  return out;
}

Value f_round(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("round", std::move(args), {"precision", "method"});
  const int64_t precision = a.int_at(0, 0);
  const std::string method = a.string_at(1, "common");
  if (!v.is_number()) throw Failure(Errc::invalid_argument, "round(): expected a number, got " + type_name(v));
  if (method == "common") {
    if (!v.is_float()) return Value(round_int(v.as_int(), precision));
    return Value(round_float(v.as_float(), precision));
  }
  if (method != "ceil" && method != "floor") {
    throw Failure(Errc::invalid_argument, "method must be common, ceil or floor");
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = v.as_float() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_map(Interpreter& interp, Value v, CallArgs args) {
  if (!truthy(v)) return iterator_of({});  // Jinja maps nothing, and checks nothing, when the input is falsy
  BoundArgs a("map", std::move(args), {}, 0, true);
  std::vector<Value> out;
  auto& named = a.rest_named();
  auto attr_it = std::find_if(named.begin(), named.end(), [](const auto& kv) { return kv.first == "attribute"; });
  if (a.rest().empty() && attr_it != named.end()) {
    const std::string attribute = to_str(attr_it->second);
    Value fallback = Value::undefined("no default");
    bool has_default = false;
    for (const auto& [k, x] : named) {
      if (k == "default") {
        fallback = x;
        has_default = true;
      } else if (k != "attribute") {
        throw Failure(Errc::invalid_argument, "map(): unexpected keyword argument '" + k + "'");
      }
    }
    for (const Value& item : iterate(v)) {
      Value r = get_path(item, attribute);
      out.push_back(r.is_undefined() && has_default ? fallback : r);
    }
    return iterator_of(std::move(out));
  }
  if (a.rest().empty()) throw Failure(Errc::invalid_argument, "map requires a filter argument");
  const std::string filter = to_str(a.rest()[0]);
  for (const Value& item : iterate(v)) {
    CallArgs fa;
    fa.positional.assign(a.rest().begin() + 1, a.rest().end());
    fa.named = named;
    out.push_back(apply_filter(interp, filter, item, std::move(fa)));
  }
  return iterator_of(std::move(out));
}

// select, reject, selectattr, rejectattr.
template <bool kKeep, bool kAttr>
Value f_select(Interpreter& interp, Value v, CallArgs args) {
  if (!truthy(v)) return iterator_of({});  // as map: a falsy input selects nothing, unchecked
  BoundArgs a("select", std::move(args), {}, 0, true);
  std::vector<Value>& rest = a.rest();
  size_t off = 0;
  std::optional<std::string> attribute;
  if (kAttr) {
    if (rest.empty()) throw Failure(Errc::invalid_argument, "Missing parameter for attribute name");
    attribute = to_str(rest[0]);
    off = 1;
  }
  std::optional<std::string> test;
  if (rest.size() > off) test = to_str(rest[off]);
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    const Value x = attribute ? get_path(item, *attribute) : item;
    bool pass;
    if (test) {
      CallArgs ta;
      ta.positional.assign(rest.begin() + static_cast<std::ptrdiff_t>(off + 1), rest.end());
      ta.named = a.rest_named();
      pass = apply_test(interp, *test, x, std::move(ta));
    } else {
      pass = truthy(x);
    }
    if (pass == kKeep) out.push_back(item);
  }
  return iterator_of(std::move(out));
}

Value f_sum(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("sum", std::move(args), {"attribute", "start"});
  const auto attribute = opt_str(a, 0);
  Value total = a.get_or(1, Value(int64_t{0}));
  for (const Value& item : iterate(v)) total = binary_op(Op::add, total, attribute ? get_path(item, *attribute) : item);
  return total;
}

template <bool kMax>
Value f_minmax(Interpreter&, Value v, CallArgs args) {
  BoundArgs a(kMax ? "max" : "min", std::move(args), {"case_sensitive", "attribute"});
  const bool case_sensitive = a.bool_at(0, false);
  const auto attribute = opt_str(a, 1);
  std::optional<Value> best, best_key;
  for (const Value& item : iterate(v)) {
    Value k = sort_key(item, attribute, case_sensitive);
    if (!best || (kMax ? compare(k, *best_key) > 0 : compare(k, *best_key) < 0)) {
      best = item;
      best_key = std::move(k);
    }
  }
  return best ? *best : Value::undefined("No aggregated item, sequence was empty.");
}

Value f_indent(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("indent", std::move(args), {"width", "first", "blank"});
  if (v.is_undefined()) fail_undefined(v);  // Jinja appends "\n" to the value itself: it must be a str
  if (!v.is_string()) throw Failure(Errc::invalid_argument, "indent(): expected a string, got " + type_name(v));
  std::string indention = "    ";
  if (a.has(0)) indention = a[0].is_string() ? a[0].as_string() : spaces(a.int_at(0, 4), "indent");
  const bool first = a.bool_at(1, false), blank = a.bool_at(2, false);
  // Jinja appends "\n" so splitlines keeps a trailing empty line's place.
  std::vector<std::string> lines = text::splitlines(to_str(v) + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (blank || !lines[i].empty()) out += indention;
    }
    out += lines[i];
  }
  return Value(first ? indention + out : out);
}

Value f_center(Interpreter& interp, Value v, CallArgs args) {
  BoundArgs a("center", std::move(args), {"width"});
  CallArgs ca;
  ca.positional.push_back(Value(a.int_at(0, 80)));
  return interp.call(get_attr(Value(to_str(v)), "center"), std::move(ca));
}

Value f_escape(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("escape", std::move(args), {});
  std::string out;
  for (char c : to_str(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value(std::move(out));
}

Value f_attr(Interpreter&, Value v, CallArgs args) {
  BoundArgs a("attr", std::move(args), {"name"}, 1);
  const std::string name = to_str(a[0]);
  if (v.is_undefined()) fail_undefined(v);
  if (auto m = bound_method(v, name)) return *m;  // attributes only: a dict's keys are not attributes
  if (v.is_ns()) {
    if (const Value* x = v.as_ns().find(Value(name))) return *x;
  }
  return Value::undefined(text::cat({"'", type_name(v), " object' has no attribute '", name, "'"}));
}

const std::pair<std::string_view, FilterFn> kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"capitalize", f_case<text::capitalize>},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_case<text::lower>},
    {"map", f_map},
    {"max", f_minmax<true>},
    {"min", f_minmax<false>},
    {"reject", f_select<false, false>},
    {"rejectattr", f_select<false, true>},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_string},
    {"select", f_select<true, false>},
    {"selectattr", f_select<true, true>},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_case<text::upper>},
};

}  // namespace

bool has_filter(std::string_view name) {
  return std::any_of(std::begin(kFilters), std::end(kFilters), [&](const auto& f) { return f.first == name; });
}

Value apply_filter(Interpreter& interp, std::string_view name, Value input, CallArgs args) {
  for (const auto& [n, fn] : kFilters) {
    if (n == name) return fn(interp, std::move(input), std::move(args));
  }
  throw Failure(Errc::unsupported, "the filter '" + std::string(name) + "' is not supported");
}

}  // namespace troupe::jinja
