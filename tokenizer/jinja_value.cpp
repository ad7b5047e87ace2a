// Python semantics of template values: truthiness, str()/repr(), equality,
// ordering and iteration (see jinja_value.hpp).
#include "tokenizer/jinja_value.hpp"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_limits.hpp"
#include "tokenizer/jinja_text.hpp"

namespace troupe::jinja {
namespace {

// Destroying a value nested N deep would recurse N times, and a template can
// nest lists 100000 deep ({% set ns.x = [ns.x] %} in a loop). So a
// container's deleter hands the containers among its items to a per-thread
// queue, which the outermost deletion empties one value at a time: the
// stack stays flat at any depth.
thread_local std::vector<Value> t_graveyard;
thread_local bool t_draining = false;

bool is_container(const Value& v) { return v.is_sequence() || v.is_dict() || v.is_ns(); }

void keep_containers(std::vector<Value>& items) {
  for (Value& v : items) {
    if (is_container(v)) t_graveyard.push_back(std::move(v));
  }
}

void keep_containers(std::vector<std::pair<Value, Value>>& items) {
  for (auto& [k, v] : items) {
    if (is_container(k)) t_graveyard.push_back(std::move(k));
    if (is_container(v)) t_graveyard.push_back(std::move(v));
  }
}

struct Bury {
  template <class T>
  void operator()(T* p) const noexcept {
    keep_containers(p->items);
    delete p;  // its strings and numbers go now
    if (t_draining) return;
    t_draining = true;
    while (!t_graveyard.empty()) {
      Value last = std::move(t_graveyard.back());
      t_graveyard.pop_back();
    }  // `last` goes here; its own items join the queue
    t_draining = false;
  }
};

// to_str, equals and compare recurse into containers, and a namespace can
// hold itself ({% set ns.me = ns %}): bounded as tojson is, and by the
// render's stack (a thread of a small stack, a sanitizer's large frames).
constexpr int kMaxValueNesting = 512;
thread_local int t_nesting = 0;
thread_local uintptr_t t_stack_floor = 0;

class NestingGuard {
 public:
  explicit NestingGuard(const char* what) {
    check_value_stack(what);
    if (++t_nesting > kMaxValueNesting) {
      --t_nesting;
      throw Failure(Errc::invalid_argument, std::string(what) + ": value nested too deeply (more than " +
                                                std::to_string(kMaxValueNesting) + " levels)");
    }
  }
  ~NestingGuard() { --t_nesting; }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;
};

}  // namespace

uintptr_t set_render_stack_floor(uintptr_t floor) { return std::exchange(t_stack_floor, floor); }

bool past_render_stack() {
  const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  return here < t_stack_floor && here + kMaxStackBytes >= t_stack_floor;
}

void check_value_stack(const char* what) {
  if (past_render_stack()) {
    throw Failure(Errc::invalid_argument, std::string(what) + ": value nested too deeply (over the render's stack)");
  }
}

Value Value::undefined(std::string hint) {
  Value v;
  v.data_ = Undef{std::move(hint)};
  return v;
}

Value Value::none() {
  Value v;
  v.data_ = None{};
  return v;
}

Value Value::sequence(std::vector<Value> items, SeqKind kind) {
  std::shared_ptr<SeqData> d(new SeqData, Bury{});
  d->items = std::move(items);
  d->kind = kind;
  Value v;
  v.data_ = std::move(d);
  return v;
}

Value Value::range(std::vector<Value> items, int64_t start, int64_t stop, int64_t step) {
  std::shared_ptr<SeqData> d(new SeqData, Bury{});
  d->items = std::move(items);
  d->kind = SeqKind::range;
  d->range_start = start;
  d->range_stop = stop;
  d->range_step = step;
  Value v;
  v.data_ = std::move(d);
  return v;
}

Value Value::dict(DictData d) {
  Value v;
  v.data_ = std::shared_ptr<const DictData>(std::shared_ptr<DictData>(new DictData(std::move(d)), Bury{}));
  return v;
}

Value Value::ns(DictData attributes) {
  Value v;
  v.data_ = std::shared_ptr<DictData>(new DictData(std::move(attributes)), Bury{});
  return v;
}

Value Value::callable(std::shared_ptr<Callable> fn) {
  Value v;
  v.data_ = std::move(fn);
  return v;
}

bool Value::is_list_or_tuple() const {
  return is_sequence() && (as_seq().kind == SeqKind::list || as_seq().kind == SeqKind::tuple);
}

int64_t Value::as_int() const { return is_bool() ? (as_bool() ? 1 : 0) : std::get<int64_t>(data_); }

double Value::as_float() const { return is_float() ? std::get<double>(data_) : static_cast<double>(as_int()); }

const void* Value::identity() const {
  switch (kind()) {
    case Kind::sequence: return &as_seq();
    case Kind::dict: return &as_dict();
    case Kind::ns: return &as_ns();
    case Kind::callable: return &as_callable();
    default: return nullptr;
  }
}

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

Value* DictData::find(const Value& key) {
  for (auto& [k, v] : items) {
    if (equals(k, key)) return &v;
  }
  return nullptr;
}

void DictData::set(Value key, Value value) {
  if (Value* slot = find(key)) {
    *slot = std::move(value);
  } else {
    items.emplace_back(std::move(key), std::move(value));
  }
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return "Undefined";
    case Value::Kind::none: return "NoneType";
    case Value::Kind::boolean: return "bool";
    case Value::Kind::integer: return "int";
    case Value::Kind::floating: return "float";
    case Value::Kind::string: return "str";
    case Value::Kind::sequence:
      switch (v.as_seq().kind) {
        case SeqKind::list: return "list";
        case SeqKind::tuple: return "tuple";
        case SeqKind::iterator: return "generator";
        case SeqKind::dict_items: return "dict_items";
        case SeqKind::dict_keys: return "dict_keys";
        case SeqKind::dict_values: return "dict_values";
        case SeqKind::range: return "range";
      }
      break;
    case Value::Kind::dict: return "dict";
    case Value::Kind::ns: return "Namespace";
    case Value::Kind::callable: return "function";
  }
  return "object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none: return false;
    case Value::Kind::boolean: return v.as_bool();
    case Value::Kind::integer: return v.as_int() != 0;
    case Value::Kind::floating: return v.as_float() != 0.0;
    case Value::Kind::string: return !v.as_string().empty();
    case Value::Kind::sequence:
      return v.as_seq().kind == SeqKind::iterator || !v.as_seq().items.empty();
    case Value::Kind::dict: return !v.as_dict().items.empty();
    case Value::Kind::ns:
    case Value::Kind::callable: return true;
  }
  return false;
}

namespace {

std::string join_repr(const std::vector<Value>& items, size_t from = 0) {
  const NestingGuard guard("str");
  std::string out;
  for (size_t i = from; i < items.size(); ++i) {
    if (i > from) out += ", ";
    out += repr(items[i]);
  }
  return out;
}

std::string dict_repr(const DictData& d) {
  const NestingGuard guard("str");
  std::string out = "{";
  for (size_t i = 0; i < d.items.size(); ++i) {
    if (i > 0) out += ", ";
    out += repr(d.items[i].first);
    out += ": ";
    out += repr(d.items[i].second);
  }
  return out + "}";
}

}  // namespace

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return "";
    case Value::Kind::none: return "None";
    case Value::Kind::boolean: return v.as_bool() ? "True" : "False";
    case Value::Kind::integer: return std::to_string(v.as_int());
    case Value::Kind::floating: return text::float_repr(v.as_float());
    case Value::Kind::string: return v.as_string();
    case Value::Kind::sequence: {
      const SeqData& s = v.as_seq();
      switch (s.kind) {
        case SeqKind::list: return text::cat({"[", join_repr(s.items), "]"});
        case SeqKind::tuple: return text::cat({"(", join_repr(s.items), s.items.size() == 1 ? ",)" : ")"});
        case SeqKind::iterator: return "<generator object>";
        case SeqKind::dict_items: return text::cat({"dict_items([", join_repr(s.items), "])"});
        case SeqKind::dict_keys: return text::cat({"dict_keys([", join_repr(s.items), "])"});
        case SeqKind::dict_values: return text::cat({"dict_values([", join_repr(s.items), "])"});
        case SeqKind::range: {
          std::string r = "range(" + std::to_string(s.range_start) + ", " + std::to_string(s.range_stop);
          if (s.range_step != 1) r += ", " + std::to_string(s.range_step);
          return r + ")";
        }
      }
      break;
    }
    case Value::Kind::dict: return dict_repr(v.as_dict());
    case Value::Kind::ns: return text::cat({"<Namespace ", dict_repr(v.as_ns()), ">"});
    case Value::Kind::callable: return text::cat({"<function ", v.as_callable().name(), ">"});
  }
  return "";
}

std::string repr(const Value& v) {
  if (v.is_string()) return text::repr(v.as_string());
  if (v.is_undefined()) return "Undefined";
  return to_str(v);
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::undefined:
    case Value::Kind::none: return true;
    case Value::Kind::string: return a.as_string() == b.as_string();
    case Value::Kind::sequence: {
      const SeqData& x = a.as_seq();
      const SeqData& y = b.as_seq();
      if (x.kind != y.kind || x.kind == SeqKind::iterator) return &x == &y;
      if (x.items.size() != y.items.size()) return false;
      const NestingGuard guard("==");
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!equals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Value::Kind::dict: {
      const DictData& x = a.as_dict();
      const DictData& y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      const NestingGuard guard("==");
      for (const auto& [k, val] : x.items) {
        const Value* other = y.find(k);
        if (!other || !equals(val, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_float(), y = b.as_float();
      // NaN sorts after every number so sorting stays a strict weak order
      // (the operators <, > on NaN go through compare_op, which says False as Python does).
      if (std::isnan(x) || std::isnan(y)) return static_cast<int>(std::isnan(x)) - static_cast<int>(std::isnan(y));
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_sequence() && b.is_sequence() && a.as_seq().kind == b.as_seq().kind &&
      (a.as_seq().kind == SeqKind::list || a.as_seq().kind == SeqKind::tuple)) {
    const auto& x = a.as_seq().items;
    const auto& y = b.as_seq().items;
    const NestingGuard guard("ordering");
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw Failure(Errc::invalid_argument, text::cat({"ordering is not supported between instances of '", type_name(a),
                                                   "' and '", type_name(b), "'"}));
}

bool hashable(const Value& v) {
  if (v.is_dict()) return false;
  if (!v.is_sequence()) return true;
  switch (v.as_seq().kind) {
    case SeqKind::tuple:
      for (const Value& item : v.as_seq().items) {
        if (!hashable(item)) return false;
      }
      return true;
    case SeqKind::iterator:
    case SeqKind::range: return true;
    default: return false;
  }
}

void fail_undefined(const Value& v) {
  throw Failure(Errc::invalid_argument, v.is_undefined() ? v.undefined_hint() : "value is undefined");
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return {};
    case Value::Kind::sequence: {
      const SeqData& s = v.as_seq();
      if (s.kind != SeqKind::iterator) return s.items;
      std::vector<Value> rest(s.items.begin() + static_cast<std::ptrdiff_t>(s.cursor), s.items.end());
      s.cursor = s.items.size();
      return rest;
    }
    case Value::Kind::dict: {
      std::vector<Value> keys;
      for (const auto& kv : v.as_dict().items) keys.push_back(kv.first);
      return keys;
    }
    case Value::Kind::string: {
      std::vector<Value> chars;
      for (char32_t c : text::decode(v.as_string())) chars.emplace_back(text::encode(std::u32string(1, c)));
      return chars;
    }
    default:
      throw Failure(Errc::invalid_argument, text::cat({"'", type_name(v), "' object is not iterable"}));
  }
}

}  // namespace troupe::jinja
