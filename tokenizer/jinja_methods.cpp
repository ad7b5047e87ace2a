// Python methods of str, dict, list and tuple as a template calls them
// (message.content.startswith(...), tool.items()). Methods that would modify
// a value are refused, as transformers' immutable sandbox refuses them, and
// Python methods not implemented here fail with "not supported".
#include <utf8proc.h>

#include <algorithm>
#include <array>

#include "tokenizer/jinja_builtins.hpp"
#include "tokenizer/jinja_ops.hpp"
#include "tokenizer/jinja_text.hpp"

namespace troupe::jinja {
namespace {

constexpr std::array kStrMethods = {
    "startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "replace",
    "upper", "lower", "capitalize", "title", "find", "rfind", "index", "rindex", "count", "join",
    "isdigit", "isdecimal", "isnumeric", "isalpha", "isalnum", "isspace", "islower", "isupper",
    "removeprefix", "removesuffix", "partition", "rpartition", "center", "ljust", "rjust", "zfill"};
constexpr std::array kStrUnsupported = {"casefold", "encode", "expandtabs", "format", "format_map", "isascii",
                                        "isidentifier", "isprintable", "istitle", "maketrans", "swapcase",
                                        "translate"};
constexpr std::array kDictMethods = {"get", "items", "keys", "values", "copy"};
constexpr std::array kDictMutators = {"clear", "pop", "popitem", "setdefault", "update", "fromkeys"};
constexpr std::array kListMutators = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};

template <size_t N>
bool among(const std::array<const char*, N>& names, std::string_view name) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

[[noreturn]] void not_supported(const Value& self, const std::string& name) {
  throw Failure(Errc::unsupported, "the method " + type_name(self) + "." + name + "() is not supported");
}

[[noreturn]] void modifies(const Value& self, const std::string& name) {
  throw Failure(Errc::unsupported, type_name(self) + "." + name +
                                       "() would modify a value, which chat templates may not do");
}

utf8proc_category_t category(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }
bool is_letter(char32_t c) {
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
         k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_LO;
}
bool is_decimal(char32_t c) { return category(c) == UTF8PROC_CATEGORY_ND; }
bool is_numeric(char32_t c) {
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}
bool is_cased(char32_t c) {
  auto k = category(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

// str.isalpha() and friends: true when non-empty and every code point passes.
template <typename Pred>
Value all_of(const std::string& s, Pred pred) {
  std::u32string cps = text::decode(s);
  return Value(!cps.empty() && std::all_of(cps.begin(), cps.end(), pred));
}

// str.islower / str.isupper: some cased code point, and none of the other case.
Value has_case(const std::string& s, bool want_lower) {
  bool any = false;
  for (char32_t c : text::decode(s)) {
    auto k = category(c);
    if (k == UTF8PROC_CATEGORY_LT) return Value(false);
    if (k == (want_lower ? UTF8PROC_CATEGORY_LU : UTF8PROC_CATEGORY_LL)) return Value(false);
    if (k == (want_lower ? UTF8PROC_CATEGORY_LL : UTF8PROC_CATEGORY_LU)) any = true;
  }
  return Value(any);
}

std::string python_title(const std::string& s) {
  std::u32string cps = text::decode(s);
  bool prev_cased = false;
  for (char32_t& c : cps) {
    const auto i = static_cast<utf8proc_int32_t>(c);
    c = static_cast<char32_t>(prev_cased ? utf8proc_tolower(i) : utf8proc_totitle(i));
    prev_cased = is_cased(c);
  }
  return text::encode(cps);
}

// s[start:end] for the optional start/end arguments of find, count, startswith.
std::string window(const std::string& s, const BoundArgs& a, size_t start_at) {
  if (!a.has(start_at) && !a.has(start_at + 1)) return s;
  Value v = get_slice(Value(s), a[start_at], a[start_at + 1], Value::none());
  return v.as_string();
}

std::optional<std::string> opt_string(const BoundArgs& a, size_t i, const char* what) {
  if (!a.has(i) || a[i].is_none()) return std::nullopt;
  if (!a[i].is_string()) throw Failure(Errc::invalid_argument, std::string(what) + " must be str or None");
  return a[i].as_string();
}

std::string need_string(const Value& v, const char* what) {
  if (!v.is_string()) {
    throw Failure(Errc::invalid_argument, std::string(what) + " must be str, not " + type_name(v));
  }
  return v.as_string();
}

// Code point offset of a byte offset into s.
int64_t cp_index(const std::string& s, size_t byte) {
  return static_cast<int64_t>(text::length(std::string_view(s).substr(0, byte)));
}

Value affix_test(const std::string& s, const BoundArgs& a, bool prefix) {
  const std::string w = window(s, a, 1);
  auto test = [&](const Value& v) {
    const std::string p = need_string(v, prefix ? "startswith argument" : "endswith argument");
    return prefix ? w.compare(0, p.size(), p) == 0 && w.size() >= p.size()
                  : w.size() >= p.size() && w.compare(w.size() - p.size(), p.size(), p) == 0;
  };
  if (a[0].is_sequence() && a[0].as_seq().kind == SeqKind::tuple) {
    const auto& items = a[0].as_seq().items;
    return Value(std::any_of(items.begin(), items.end(), test));
  }
  return Value(test(a[0]));
}

// Widths for center/ljust/rjust/zfill; an absurd one is refused, not allocated.
int64_t pad_width(const BoundArgs& a) {
  const int64_t width = a.int_at(0, 0);
  if (width > (int64_t{1} << 26)) throw Failure(Errc::invalid_argument, "padding width is too large");
  return width;
}

Value pad(const std::string& s, const BoundArgs& a, int where) {  // -1 ljust, 0 center, 1 rjust
  const int64_t width = pad_width(a);
  const std::string fill = a.string_at(1, " ");
  if (text::length(fill) != 1) {
    throw Failure(Errc::invalid_argument, "the fill character must be exactly one character long");
  }
  const auto n = static_cast<int64_t>(text::length(s));
  if (width <= n) return Value(s);
  const int64_t total = width - n;
  // CPython's center: the odd extra fill goes left only when width is odd too.
  const int64_t left = where < 0 ? 0 : (where > 0 ? total : total / 2 + (total & width & 1));
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return Value(std::move(out));
}

Value str_method(const Value& self, const std::string& name, CallArgs args) {
  const std::string& s = self.as_string();
  const std::string fn = "str." + name;
  if (name == "startswith" || name == "endswith") {
    BoundArgs a(fn, std::move(args), {"prefix", "start", "end"}, 1);
    return affix_test(s, a, name == "startswith");
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    BoundArgs a(fn, std::move(args), {"chars"});
    return Value(text::strip(s, opt_string(a, 0, "chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    BoundArgs a(fn, std::move(args), {"sep", "maxsplit"});
    auto sep = opt_string(a, 0, "sep");
    if (sep && sep->empty()) throw Failure(Errc::invalid_argument, "empty separator");
    const int64_t max_split = a.int_at(1, -1);
    auto parts = name == "split" ? text::split(s, sep, max_split) : text::rsplit(s, sep, max_split);
    std::vector<Value> out(parts.begin(), parts.end());
    return Value::sequence(std::move(out));
  }
  if (name == "splitlines") {
    BoundArgs a(fn, std::move(args), {"keepends"});
    if (a.bool_at(0, false)) throw Failure(Errc::unsupported, "str.splitlines(keepends=True) is not supported");
    auto parts = text::splitlines(s);
    return Value::sequence(std::vector<Value>(parts.begin(), parts.end()));
  }
  if (name == "replace") {
    BoundArgs a(fn, std::move(args), {"old", "new", "count"}, 2);
    return Value(text::replace(s, need_string(a[0], "old"), need_string(a[1], "new"), a.int_at(2, -1)));
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    BoundArgs a(fn, std::move(args), {});
    if (name == "upper") return Value(text::upper(s));
    if (name == "lower") return Value(text::lower(s));
    if (name == "capitalize") return Value(text::capitalize(s));
    return Value(python_title(s));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    BoundArgs a(fn, std::move(args), {"sub", "start", "end"}, 1);
    const std::string sub = need_string(a[0], "sub");
    const std::string w = window(s, a, 1);
    int64_t offset = 0;  // where the window starts, in code points
    if (a.has(1) && !a[1].is_none()) {
      const std::string tail = get_slice(Value(s), a[1], Value::none(), Value::none()).as_string();
      offset = static_cast<int64_t>(text::length(s) - text::length(tail));
    }
    if (name == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(text::length(w)) + 1);
      int64_t n = 0;
      for (size_t at = w.find(sub); at != std::string::npos; at = w.find(sub, at + sub.size())) ++n;
      return Value(n);
    }
    const size_t at = name[0] == 'r' ? w.rfind(sub) : w.find(sub);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex") throw Failure(Errc::invalid_argument, "substring not found");
      return Value(int64_t{-1});
    }
    return Value(offset + cp_index(w, at));
  }
  if (name == "join") {
    BoundArgs a(fn, std::move(args), {"iterable"}, 1);
    std::string out;
    bool first = true;
    for (const Value& v : iterate(a[0])) {
      if (!first) out += s;
      first = false;
      out += need_string(v, "sequence item");
    }
    return Value(std::move(out));
  }
  if (name.rfind("is", 0) == 0) {
    BoundArgs a(fn, std::move(args), {});
    if (name == "isdigit" || name == "isdecimal") return all_of(s, is_decimal);
    if (name == "isnumeric") return all_of(s, is_numeric);
    if (name == "isalpha") return all_of(s, is_letter);
    if (name == "isalnum") return all_of(s, [](char32_t c) { return is_letter(c) || is_numeric(c); });
    if (name == "isspace") return all_of(s, text::is_space);
    return has_case(s, name == "islower");
  }
  if (name == "removeprefix" || name == "removesuffix") {
    BoundArgs a(fn, std::move(args), {"affix"}, 1);
    const std::string x = need_string(a[0], "argument");
    if (name == "removeprefix") return Value(s.rfind(x, 0) == 0 ? s.substr(x.size()) : s);
    const bool ends = s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
    return Value(ends ? s.substr(0, s.size() - x.size()) : s);
  }
  if (name == "partition" || name == "rpartition") {
    BoundArgs a(fn, std::move(args), {"sep"}, 1);
    const std::string sep = need_string(a[0], "sep");
    if (sep.empty()) throw Failure(Errc::invalid_argument, "empty separator");
    const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos) {
      return name == "partition" ? Value::tuple({Value(s), Value(""), Value("")})
                                 : Value::tuple({Value(""), Value(""), Value(s)});
    }
    return Value::tuple({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))});
  }
  if (name == "zfill") {
    BoundArgs a(fn, std::move(args), {"width"}, 1);
    const int64_t width = pad_width(a);
    const auto n = static_cast<int64_t>(text::length(s));
    if (width <= n) return Value(s);
    const size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
    return Value(s.substr(0, sign) + std::string(static_cast<size_t>(width - n), '0') + s.substr(sign));
  }
  BoundArgs a(fn, std::move(args), {"width", "fillchar"}, 1);
  return pad(s, a, name == "ljust" ? -1 : (name == "center" ? 0 : 1));
}

Value dict_method(const Value& self, const std::string& name, CallArgs args) {
  const DictData& d = self.as_dict();
  const std::string fn = "dict." + name;
  if (name == "get") {
    BoundArgs a(fn, std::move(args), {"key", "default"}, 1);
    const Value* v = d.find(a[0]);
    return v ? *v : a.get_or(1, Value::none());
  }
  BoundArgs a(fn, std::move(args), {});
  if (name == "copy") return Value::dict(d);
  std::vector<Value> out;
  for (const auto& [k, v] : d.items) {
    if (name == "items") out.push_back(Value::tuple({k, v}));
    else out.push_back(name == "keys" ? k : v);
  }
  const SeqKind kind = name == "items" ? SeqKind::dict_items : (name == "keys" ? SeqKind::dict_keys : SeqKind::dict_values);
  return Value::sequence(std::move(out), kind);
}

Value list_method(const Value& self, const std::string& name, CallArgs args) {
  const SeqData& s = self.as_seq();
  const std::string fn = type_name(self) + "." + name;
  if (name == "copy") {
    BoundArgs a(fn, std::move(args), {});
    return Value::sequence(s.items, s.kind);
  }
  BoundArgs a(fn, std::move(args), {"value"}, 1);
  int64_t n = 0;
  for (size_t i = 0; i < s.items.size(); ++i) {
    if (!equals(s.items[i], a[0])) continue;
    if (name == "index") return Value(static_cast<int64_t>(i));
    ++n;
  }
  if (name == "index") throw Failure(Errc::invalid_argument, repr(a[0]) + " is not in " + type_name(self));
  return Value(n);
}

class BoundMethod : public Callable {
 public:
  BoundMethod(Value self, std::string method) : self_(std::move(self)), method_(std::move(method)) {}
  std::string name() const override { return type_name(self_) + "." + method_; }
  Value call(Interpreter&, CallArgs args) override {
    if (self_.is_string()) {
      if (among(kStrUnsupported, method_)) not_supported(self_, method_);
      return str_method(self_, method_, std::move(args));
    }
    if (self_.is_dict()) {
      if (among(kDictMutators, method_)) modifies(self_, method_);
      return dict_method(self_, method_, std::move(args));
    }
    if (among(kListMutators, method_)) modifies(self_, method_);
    return list_method(self_, method_, std::move(args));
  }

 private:
  Value self_;
  std::string method_;
};

}  // namespace

std::optional<Value> bound_method(const Value& self, const std::string& name) {
  bool known = false;
  if (self.is_string()) {
    known = among(kStrMethods, name) || among(kStrUnsupported, name);
  } else if (self.is_dict()) {
    known = among(kDictMethods, name) || among(kDictMutators, name);
  } else if (self.is_list_or_tuple()) {
    const bool is_list = self.as_seq().kind == SeqKind::list;
    known = name == "count" || name == "index" || (is_list && (name == "copy" || among(kListMutators, name)));
  }
  if (!known) return std::nullopt;
  return Value::callable(std::make_shared<BoundMethod>(self, name));
}

}  // namespace troupe::jinja
