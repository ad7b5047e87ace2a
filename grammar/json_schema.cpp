// The schema walk: each (sub)schema becomes one rule deriving the JSON
// text it accepts; $ref targets become rules of their own, declared before
// they are compiled, so recursive schemas (trees, linked lists) work.
#include "grammar/json_schema.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "core/error.hpp"
#include "grammar/json_rules.hpp"

namespace troupe::grammar {
namespace {

// ordered_json: objects keep the order the schema lists properties in.
using json = nlohmann::ordered_json;

// Nesting of subschemas (a $ref counts once): deeper schemas are refused.
constexpr int kMaxDepth = 64;
// Properties of one object: the rules grow with their count.
constexpr size_t kMaxProperties = 1024;
// Repetition counts (minItems, maxLength, ...) the grammar spells out.
constexpr int64_t kMaxCount = 4096;

// Keywords that assert something this compiler does not enforce. A schema
// using one is refused: output that ignores it would break the promise.
const std::set<std::string>& unsupported_keywords() {
  static const std::set<std::string> k{
      "pattern",        "patternProperties", "minProperties", "maxProperties",         "propertyNames",
      "dependentRequired", "dependentSchemas", "dependencies", "if",                   "then",
      "else",           "not",               "contains",      "minContains",           "maxContains",
      "multipleOf",     "unevaluatedProperties", "unevaluatedItems", "additionalItems", "contentSchema",
  };
  return k;
}

// Keywords that shape the value; beside $ref / anyOf / oneOf / allOf they
// would have to hold as well, which this compiler does not combine.
const std::set<std::string>& value_keywords() {
  static const std::set<std::string> k{
      "type",      "properties", "required",  "additionalProperties", "items",   "prefixItems",
      "minItems",  "maxItems",   "enum",      "const",                "minLength", "maxLength",
      "minimum",   "maximum",    "exclusiveMinimum", "exclusiveMaximum", "uniqueItems",
  };
  return k;
}

class SchemaCompiler {
 public:
  explicit SchemaCompiler(const json& root) : root_(root), rules_(g_) {}

  std::shared_ptr<const Grammar> run() {
    const int32_t value = compile(root_, "#", 0);
    g_.finish(rules_.document(value));
    return std::make_shared<const Grammar>(std::move(g_));
  }

  std::shared_ptr<const Grammar> run(const JsonFrame& frame) {
    const int32_t value = compile(root_, "#", 0);
    Alternative item = Grammar::literal(frame.item_open);
    item.push_back(Grammar::ref(value));
    Grammar::append_literal(item, frame.item_close);
    const int32_t one = g_.add("item", {std::move(item)});
    Alternative all = Grammar::literal(frame.open);
    all.push_back(Grammar::ref(one));
    if (frame.max_values != 1) {
      Alternative more = Grammar::literal(frame.separator);
      more.push_back(Grammar::ref(one));
      all.push_back(g_.rep(more, 0, frame.max_values < 0 ? -1 : frame.max_values - 1, "more"));
    }
    Grammar::append_literal(all, frame.close);
    g_.finish(g_.add("framed", {std::move(all)}));
    return std::make_shared<const Grammar>(std::move(g_));
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& what) {
    throw Error(Errc::invalid_argument, "json_schema " + path + ": " + what);
  }

  int32_t compile(const json& s, const std::string& path, int depth) {
    if (depth > kMaxDepth) fail(path, "nests deeper than " + std::to_string(kMaxDepth) + " levels");
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(path, "the schema false accepts no value");
      return rules_.value();
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      if (unsupported_keywords().contains(k)) {
        if (k == "additionalItems" && v.is_boolean() && v.get<bool>()) continue;
        fail(path, "the keyword '" + k + "' is not supported");
      }
      if (k == "uniqueItems" && !(v.is_boolean() && !v.get<bool>())) fail(path, "the keyword 'uniqueItems' is not supported");
    }
    int32_t rule = -1;
    if (s.contains("$ref")) {
      only_with_annotations(s, "$ref", path);
      rule = reference(s.at("$ref"), path + "/$ref", depth);
    } else if (s.contains("anyOf") || s.contains("oneOf")) {
      const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
      only_with_annotations(s, key, path);
      rule = any_of(s.at(key), path + "/" + key, depth);
    } else if (s.contains("allOf")) {
      only_with_annotations(s, "allOf", path);
      const json& all = s.at("allOf");
      if (!all.is_array() || all.size() != 1) fail(path + "/allOf", "only an allOf of one schema is supported");
      rule = compile(all.at(0), path + "/allOf/0", depth + 1);
    } else if (s.contains("const")) {
      rule = g_.add("const", {Grammar::literal(s.at("const").dump())});
    } else if (s.contains("enum")) {
      rule = enumeration(s.at("enum"), path + "/enum");
    } else {
      rule = typed(s, path, depth);
    }
    if (s.contains("nullable") && s.at("nullable").is_boolean() && s.at("nullable").get<bool>()) {
      rule = g_.add("nullable", {{Grammar::ref(rule)}, {Grammar::ref(rules_.null())}});
    }
    return rule;
  }

  static void only_with_annotations(const json& s, const std::string& key, const std::string& path) {
    for (const auto& [k, v] : s.items()) {
      if (k != key && (value_keywords().contains(k) || k == "anyOf" || k == "oneOf" || k == "allOf" || k == "$ref")) {
        fail(path, "'" + k + "' beside '" + key + "' is not supported");
      }
    }
  }

  int32_t reference(const json& ref, const std::string& path, int depth) {
    if (!ref.is_string()) fail(path, "must be a string");
    const std::string target = ref.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#') fail(path, "only references inside the schema (\"#/...\") are supported");
    const json* resolved = nullptr;
    try {
      resolved = target == "#" ? &root_ : &root_.at(json::json_pointer(target.substr(1)));
    } catch (const std::exception&) {
      fail(path, "'" + target + "' does not resolve");
    }
    // Declared before its body is compiled: a recursive schema refers to
    // the rule being defined.
    const int32_t rule = g_.declare("ref " + target);
    refs_.emplace(target, rule);
    const int32_t body = compile(*resolved, target, depth + 1);
    g_.define(rule, {{Grammar::ref(body)}});
    return rule;
  }

  int32_t any_of(const json& list, const std::string& path, int depth) {
    if (!list.is_array() || list.empty()) fail(path, "must be a non-empty array of schemas");
    std::vector<Alternative> alts;
    for (size_t i = 0; i < list.size(); ++i) {
      alts.push_back({Grammar::ref(compile(list[i], path + "/" + std::to_string(i), depth + 1))});
    }
    return g_.add("any-of", std::move(alts));
  }

  int32_t enumeration(const json& list, const std::string& path) {
    if (!list.is_array() || list.empty()) fail(path, "must be a non-empty array");
    std::vector<Alternative> alts;
    for (const json& v : list) alts.push_back(Grammar::literal(v.dump()));
    return g_.add("enum", std::move(alts));
  }

  int32_t typed(const json& s, const std::string& path, int depth) {
    std::vector<std::string> types;
    if (const auto it = s.find("type"); it != s.end()) {
      if (it->is_string()) {
        types.push_back(it->get<std::string>());
      } else if (it->is_array() && !it->empty()) {
        for (const json& t : *it) {
          if (!t.is_string()) fail(path + "/type", "must be a string or an array of strings");
          types.push_back(t.get<std::string>());
        }
      } else {
        fail(path + "/type", "must be a string or a non-empty array of strings");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("prefixItems")) {
      types.push_back("array");
    } else if (s.contains("minLength") || s.contains("maxLength")) {
      types.push_back("string");
    } else {
      return rules_.value();
    }
    std::vector<Alternative> alts;
    for (const std::string& t : types) alts.push_back({Grammar::ref(one_type(s, t, path, depth))});
    return alts.size() == 1 ? alts[0][0].rule : g_.add("types", std::move(alts));
  }

  int32_t one_type(const json& s, const std::string& type, const std::string& path, int depth) {
    if (type == "object") return object(s, path, depth);
    if (type == "array") return array(s, path, depth);
    if (type == "string") return string(s, path);
    if (type == "integer") return integer(s, path);
    if (type == "number") return number(s, path);
    if (type == "boolean") return rules_.boolean();
    if (type == "null") return rules_.null();
    fail(path + "/type", "unknown type '" + type + "'");
  }

  static std::optional<int64_t> count(const json& s, const char* key, const std::string& path) {
    const auto it = s.find(key);
    if (it == s.end()) return std::nullopt;
    if (!it->is_number_integer() || it->get<int64_t>() < 0) fail(path + "/" + key, "must be a non-negative integer");
    const int64_t v = it->get<int64_t>();
    if (v > kMaxCount) fail(path + "/" + key, "above " + std::to_string(kMaxCount) + " is not supported");
    return v;
  }

  int32_t string(const json& s, const std::string& path) {
    const auto lo = count(s, "minLength", path);
    const auto hi = count(s, "maxLength", path);
    if (!lo && !hi) return rules_.string();
    if (lo && hi && *lo > *hi) fail(path, "minLength is above maxLength");
    return rules_.string(static_cast<int32_t>(lo.value_or(0)), hi ? static_cast<int32_t>(*hi) : -1);
  }

  // A bound from minimum/maximum (and draft 4's boolean or draft 6's
  // numeric exclusive forms), rounded inward to an integer.
  static std::optional<int64_t> int_bound(const json& s, bool lower, const std::string& path) {
    const char* key = lower ? "minimum" : "maximum";
    const char* ex_key = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    std::optional<double> v;
    bool exclusive = false;
    if (const auto it = s.find(key); it != s.end()) {
      if (!it->is_number()) fail(path + "/" + key, "must be a number");
      v = it->get<double>();
    }
    if (const auto it = s.find(ex_key); it != s.end()) {
      if (it->is_boolean()) {
        exclusive = it->get<bool>();
      } else if (it->is_number()) {
        const double e = it->get<double>();
        if (!v || (lower ? e >= *v : e <= *v)) {
          v = e;
          exclusive = true;
        }
      } else {
        fail(path + "/" + ex_key, "must be a number");
      }
    }
    if (!v) return std::nullopt;
    double b = lower ? std::ceil(*v) : std::floor(*v);
    if (exclusive && b == *v) b += lower ? 1 : -1;
    if (!(b >= -9.2e18 && b <= 9.2e18)) fail(path + "/" + key, "is outside the 64-bit integer range");
    return static_cast<int64_t>(b);
  }

  int32_t integer(const json& s, const std::string& path) {
    const auto lo = int_bound(s, true, path);
    const auto hi = int_bound(s, false, path);
    if (!lo && !hi) return rules_.integer();
    try {
      return rules_.integer_range(lo, hi);
    } catch (const Error& e) {
      fail(path, e.what());
    }
  }

  int32_t number(const json& s, const std::string& path) {
    const bool bounded = s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                         s.contains("exclusiveMaximum");
    if (!bounded) return rules_.number();
    // Only "minimum": 0 (non-negative numbers) is spelt by the grammar;
    // other bounds on non-integers would need digit-by-digit comparisons
    // of fractions.
    const auto it = s.find("minimum");
    if (it != s.end() && it->is_number() && it->get<double>() == 0.0 && !s.contains("maximum") &&
        !s.contains("exclusiveMinimum") && !s.contains("exclusiveMaximum")) {
      return rules_.non_negative_number();
    }
    fail(path, "bounds on a number other than \"minimum\": 0 are not supported (use \"type\": \"integer\" for integer bounds)");
  }

  int32_t array(const json& s, const std::string& path, int depth) {
    const auto lo = count(s, "minItems", path);
    const auto hi = count(s, "maxItems", path);
    if (lo && hi && *lo > *hi) fail(path, "minItems is above maxItems");
    const auto items_it = s.find("items");
    if (const auto p = s.find("prefixItems"); p != s.end()) {
      return tuple(*p, items_it == s.end() ? nullptr : &*items_it, lo, hi, path, depth);
    }
    if (items_it != s.end() && items_it->is_boolean() && !items_it->get<bool>()) {
      if (lo && *lo > 0) fail(path, "items false with minItems above 0 accepts nothing");
      return rules_.array_of(rules_.value(), 0, 0, "array");
    }
    const int32_t item = items_it == s.end() ? rules_.value() : compile(*items_it, path + "/items", depth + 1);
    return rules_.array_of(item, static_cast<int32_t>(lo.value_or(0)), hi ? static_cast<int32_t>(*hi) : -1, "array");
  }

  // prefixItems: the items at the first positions, each present only if
  // the ones before it are; minItems of them required; then, when `items`
  // is a schema, more of those up to maxItems. `items` absent means no
  // more (strict, as for objects: the output still validates).
  int32_t tuple(const json& prefix, const json* items, std::optional<int64_t> lo, std::optional<int64_t> hi,
                const std::string& path, int depth) {
    if (!prefix.is_array()) fail(path + "/prefixItems", "must be an array of schemas");
    const Symbol w = Grammar::ref(rules_.ws());
    const bool more = items != nullptr && !(items->is_boolean() && !items->get<bool>());
    size_t m = prefix.size();
    if (hi && static_cast<size_t>(*hi) < m) m = static_cast<size_t>(*hi);
    const int64_t min_items = lo.value_or(0);
    if (!more && static_cast<size_t>(min_items) > m) fail(path, "minItems asks for more items than prefixItems allows");
    if (m == 0) {
      const int32_t item = more ? compile(*items, path + "/items", depth + 1) : rules_.value();
      return rules_.array_of(item, static_cast<int32_t>(min_items), more ? (hi ? static_cast<int32_t>(*hi) : -1) : 0,
                             "array");
    }
    // tail[k]: positions k.. given that k - 1 items were written; built
    // from the end, so a rule refers only to rules already made.
    int32_t tail = -1;
    if (more) {
      const int32_t item = compile(*items, path + "/items", depth + 1);
      const int64_t extra_min = std::max<int64_t>(0, min_items - static_cast<int64_t>(m));
      const int64_t extra_max = hi ? *hi - static_cast<int64_t>(m) : -1;
      tail = g_.rep({Grammar::byte(','), w, Grammar::ref(item), w}, static_cast<int32_t>(extra_min),
                    static_cast<int32_t>(extra_max), "more-items")
                 .rule;
    } else {
      tail = g_.add("end", {{}});
    }
    for (size_t k = m; k-- > 0;) {
      Alternative present;
      if (k > 0) present.insert(present.end(), {Grammar::byte(','), w});
      present.insert(present.end(),
                     {Grammar::ref(compile(prefix[k], path + "/prefixItems/" + std::to_string(k), depth + 1)), w,
                      Grammar::ref(tail)});
      std::vector<Alternative> alts{std::move(present)};
      // Position k may be missing only where minItems allows it, and only
      // when nothing follows (an absent item ends the array).
      if (static_cast<int64_t>(k) >= min_items) alts.push_back({});
      tail = g_.add("items-from " + std::to_string(k), std::move(alts));
    }
    return g_.add("tuple", {{Grammar::byte('['), w, Grammar::ref(tail), Grammar::byte(']')}});
  }

  int32_t object(const json& s, const std::string& path, int depth) {
    const auto props_it = s.find("properties");
    const auto addl_it = s.find("additionalProperties");
    if (props_it == s.end() && addl_it == s.end() && !s.contains("required")) return rules_.any_object();
    if (props_it != s.end() && !props_it->is_object()) fail(path + "/properties", "must be an object");

    // (name, value rule, required) in the schema's order; required names
    // without a schema of their own take any value.
    std::set<std::string> required;
    if (const auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) fail(path + "/required", "must be an array of strings");
      for (const json& n : *r) {
        if (!n.is_string()) fail(path + "/required", "must be an array of strings");
        required.insert(n.get<std::string>());
      }
    }
    struct Prop {
      std::string name;
      int32_t rule;
      bool required;
    };
    std::vector<Prop> props;
    if (props_it != s.end()) {
      if (props_it->size() > kMaxProperties) fail(path + "/properties", "more than 1024 properties");
      for (const auto& [name, sub] : props_it->items()) {
        props.push_back({name, compile(sub, path + "/properties/" + name, depth + 1), required.contains(name)});
      }
    }
    for (const std::string& name : required) {
      const bool listed = std::any_of(props.begin(), props.end(), [&](const Prop& p) { return p.name == name; });
      if (!listed) props.push_back({name, rules_.value(), true});
    }

    // Members beyond the listed ones: none unless additionalProperties is
    // true or a schema.
    int32_t extra_value = -1;
    if (addl_it != s.end()) {
      if (addl_it->is_boolean()) {
        if (addl_it->get<bool>()) extra_value = rules_.value();
      } else {
        extra_value = compile(*addl_it, path + "/additionalProperties", depth + 1);
      }
    }
    const Symbol w = Grammar::ref(rules_.ws());
    const Symbol comma = Grammar::byte(',');

    // after[k]: members k.. when one was written already (each after a
    // comma); first[k]: members k.. when none was. Built from the end.
    int32_t after_k = -1, first_k = -1;
    if (extra_value >= 0) {
      const int32_t kv = g_.add("member", {{Grammar::ref(rules_.string()), w, Grammar::byte(':'), w,
                                            Grammar::ref(extra_value), w}});
      const Symbol more = g_.rep({comma, w, Grammar::ref(kv)}, 0, -1, "extra-members");
      after_k = more.rule;
      first_k = g_.add("extra-first", {{Grammar::ref(kv), more}, {}});
    } else {
      after_k = g_.add("end", {{}});
      first_k = after_k;
    }
    for (size_t k = props.size(); k-- > 0;) {
      const Prop& p = props[k];
      Alternative kv = Grammar::literal(json(p.name).dump());
      kv.insert(kv.end(), {w, Grammar::byte(':'), w, Grammar::ref(p.rule), w, Grammar::ref(after_k)});
      Alternative with_comma{comma, w};
      with_comma.insert(with_comma.end(), kv.begin(), kv.end());
      std::vector<Alternative> after_alts{with_comma};
      std::vector<Alternative> first_alts{kv};
      if (!p.required) {
        after_alts.push_back({Grammar::ref(after_k)});
        first_alts.push_back({Grammar::ref(first_k)});
      }
      const int32_t a = g_.add("members-after " + p.name, std::move(after_alts));
      first_k = g_.add("members " + p.name, std::move(first_alts));
      after_k = a;
    }
    return g_.add("object", {{Grammar::byte('{'), w, Grammar::ref(first_k), Grammar::byte('}')}});
  }

  const json& root_;
  Grammar g_;
  JsonRules rules_;
  std::map<std::string, int32_t> refs_;
};

json parse_schema(std::string_view text) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw Error(Errc::invalid_argument, std::string("json_schema: not valid JSON: ") + e.what());
  }
}

}  // namespace

std::shared_ptr<const Grammar> json_schema_grammar(std::string_view schema) {
  const json root = parse_schema(schema);
  return SchemaCompiler(root).run();
}

std::shared_ptr<const Grammar> framed_json_grammar(std::string_view schema, const JsonFrame& frame) {
  const json root = parse_schema(schema);
  return SchemaCompiler(root).run(frame);
}

std::shared_ptr<const Grammar> choice_grammar(std::string_view choices) {
  json list;
  try {
    list = json::parse(choices);
  } catch (const json::exception& e) {
    throw Error(Errc::invalid_argument, std::string("choices: not valid JSON: ") + e.what());
  }
  if (!list.is_array() || list.empty()) throw Error(Errc::invalid_argument, "choices: must be a non-empty array of strings");
  Grammar g;
  std::vector<Alternative> alts;
  for (const json& c : list) {
    if (!c.is_string()) throw Error(Errc::invalid_argument, "choices: must be a non-empty array of strings");
    alts.push_back(Grammar::literal(c.get<std::string>()));
  }
  g.finish(g.add("choice", std::move(alts)));
  return std::make_shared<const Grammar>(std::move(g));
}

std::shared_ptr<const Grammar> json_object_grammar() {
  Grammar g;
  JsonRules rules(g);
  const int32_t doc = rules.document(rules.any_object());
  g.finish(doc);
  return std::make_shared<const Grammar>(std::move(g));
}

}  // namespace troupe::grammar
