// JSON <-> template values (see jinja_json.hpp). The writer follows CPython's
// json encoder: its escapes, float repr, NaN/Infinity, separators, indent.
#include "tokenizer/jinja_json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "tokenizer/jinja_text.hpp"

namespace troupe::jinja {

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value(j.get<bool>());
    case T::number_integer: return Value(j.get<int64_t>());
    case T::number_unsigned: {
      auto u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case T::number_float: return Value(j.get<double>());
    case T::string: return Value(j.get<std::string>());
    case T::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::sequence(std::move(items));
    }
    case T::object: {
      DictData d;
      d.items.reserve(j.size());
      for (const auto& [k, e] : j.items()) d.items.emplace_back(Value(k), from_json(e));
      return Value::dict(std::move(d));
    }
    case T::binary:
    case T::discarded: break;
  }
  throw Failure(Errc::invalid_argument, "JSON value of this type cannot be passed to a chat template");
}

namespace {

void append_escaped(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : text::decode(s)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    char buf[16];
    if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
      if (c >= 0x10000) {  // a surrogate pair, as \u escapes can only name 16 bits
        const char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                      static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      }
      out += buf;
    } else {
      out += text::encode(std::u32string(1, c));
    }
  }
  out += '"';
}

std::string float_json(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
  return text::float_repr(f);
}

[[noreturn]] void not_serializable(const Value& v) {
  throw Failure(Errc::invalid_argument, "Object of type " + type_name(v) + " is not JSON serializable");
}

class Writer {
 public:
  explicit Writer(const JsonDumpOptions& o)
      : o_(o), item_sep_(o.item_separator ? *o.item_separator : (o.indent ? "," : ", ")) {}

  void write(std::string& out, const Value& v, int depth) {
    if (depth > 512) throw Failure(Errc::invalid_argument, "tojson: value nested too deeply");
    check_value_stack("tojson");
    switch (v.kind()) {
      case Value::Kind::none: out += "null"; return;
      case Value::Kind::boolean: out += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::integer: out += std::to_string(v.as_int()); return;
      case Value::Kind::floating: out += float_json(v.as_float()); return;
      case Value::Kind::string: append_escaped(out, v.as_string(), o_.ensure_ascii); return;
      case Value::Kind::sequence:
        if (!v.is_list_or_tuple()) not_serializable(v);
        write_list(out, v.as_seq().items, depth);
        return;
      case Value::Kind::dict: write_dict(out, v.as_dict(), depth); return;
      default: not_serializable(v);
    }
  }

 private:
  void newline(std::string& out, int depth) const {
    out += '\n';
    for (int i = 0; i < depth; ++i) out += *o_.indent;
  }

  void write_list(std::string& out, const std::vector<Value>& items, int depth) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep_;
      if (o_.indent) newline(out, depth + 1);
      write(out, items[i], depth + 1);
    }
    if (o_.indent) newline(out, depth);
    out += ']';
  }

  std::string key_text(const Value& k) const {
    switch (k.kind()) {
      case Value::Kind::string: return k.as_string();
      case Value::Kind::integer: return std::to_string(k.as_int());
      case Value::Kind::floating: return float_json(k.as_float());
      case Value::Kind::boolean: return k.as_bool() ? "true" : "false";
      case Value::Kind::none: return "null";
      default:
        throw Failure(Errc::invalid_argument,
                      "keys must be str, int, float, bool or None, not " + type_name(k));
    }
  }

  void write_dict(std::string& out, const DictData& d, int depth) {
    if (d.items.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> order;
    for (const auto& kv : d.items) order.push_back(&kv);
    if (o_.sort_keys) {
      std::stable_sort(order.begin(), order.end(),
                       [](const auto* a, const auto* b) { return compare(a->first, b->first) < 0; });
    }
    out += '{';
    for (size_t i = 0; i < order.size(); ++i) {
      if (i > 0) out += item_sep_;
      if (o_.indent) newline(out, depth + 1);
      append_escaped(out, key_text(order[i]->first), o_.ensure_ascii);
      out += o_.key_separator;
      write(out, order[i]->second, depth + 1);
    }
    if (o_.indent) newline(out, depth);
    out += '}';
  }

  const JsonDumpOptions& o_;
  std::string item_sep_;
};

}  // namespace

std::string to_json(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  Writer(options).write(out, v, 0);
  return out;
}

}  // namespace troupe::jinja
