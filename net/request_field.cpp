// The readers of one request field, shared by the endpoints' parsers
// (request_parser.cpp, embeddings_request.cpp, request_tools.cpp).
#include "net/request_field.hpp"

#include <boost/json/stream_parser.hpp>
#include <cmath>
#include <limits>

#include "net/api_error.hpp"

namespace troupe::net {

namespace json = boost::json;

namespace {

const char* kind_name(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
      return "an integer";
    case json::kind::double_:
      return "a number";
    case json::kind::string:
      return "a string";
    case json::kind::array:
      return "an array";
    case json::kind::object:
      return "an object";
  }
  return "a value";
}

std::string fmt(double x) {
  std::string s = std::to_string(x);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

[[noreturn]] void wrong_type(const std::string& param, const char* expected, const json::value& got) {
  throw invalid_field(param, "'" + param + "' must be " + expected + ", got " + kind_name(got), "invalid_type");
}

[[noreturn]] void out_of_range(const std::string& param, const std::string& range) {
  throw invalid_field(param, "'" + param + "' must be " + range, "invalid_value");
}

json::object parse_object(std::string_view body, const char* what) {
  json::stream_parser p;
  boost::system::error_code ec;
  const size_t used = p.write(body.data(), body.size(), ec);
  if (!ec) p.finish(ec);
  if (ec) {
    throw ApiError(
        400, std::string(what) + " is not valid JSON (" + ec.message() + " near byte " + std::to_string(used) + ")", {},
        "invalid_json");
  }
  json::value root = p.release();
  if (!root.is_object()) {
    throw ApiError(400, std::string(what) + " must be a JSON object, got " + kind_name(root), {}, "invalid_json");
  }
  return std::move(root.as_object());
}

std::optional<bool> get_bool(const json::object& o, const char* key) {
  const json::value* v = field(o, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_bool()) wrong_type(key, "a boolean", *v);
  return v->as_bool();
}

std::optional<int64_t> get_int(const json::object& o, const char* key, int64_t lo, int64_t hi) {
  const json::value* v = field(o, key);
  if (v == nullptr) return std::nullopt;
  int64_t x = 0;
  if (v->is_int64()) {
    x = v->as_int64();
  } else if (v->is_uint64()) {
    x = std::numeric_limits<int64_t>::max();  // beyond any range we accept
  } else {
    wrong_type(key, "an integer", *v);
  }
  if (x < lo || x > hi) out_of_range(key, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

std::optional<float> get_number(const json::object& o, const char* key, double lo, double hi, bool lo_open) {
  const json::value* v = field(o, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) wrong_type(key, "a number", *v);
  const double x = v->to_number<double>();
  if (!std::isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi) {
    out_of_range(key, std::string("a number in ") + (lo_open ? "(" : "[") + fmt(lo) + ", " + fmt(hi) + "]");
  }
  return static_cast<float>(x);
}

std::string required_string(const json::object& o, const char* key, const std::string& param) {
  const json::value* v = field(o, key);
  if (v == nullptr) throw invalid_field(param, "'" + param + "' is required", "missing_field");
  if (!v->is_string()) wrong_type(param, "a string", *v);
  return str(v->as_string());
}

std::optional<std::string> get_string(const json::object& o, const char* key) {
  const json::value* v = field(o, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) wrong_type(key, "a string", *v);
  return std::string(v->as_string().data(), v->as_string().size());
}

std::vector<int32_t> token_list(const json::array& a, const std::string& param) {
  std::vector<int32_t> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    // A token id is a whole number in [0, 2^31); the vocabulary's own bound
    // is the engine's rule (it knows the model).
    const bool integer = a[i].is_int64() || a[i].is_uint64();
    if (!integer) wrong_type(p, "a token id (an integer)", a[i]);
    const bool negative = a[i].is_int64() && a[i].as_int64() < 0;
    const bool huge = a[i].is_uint64() || a[i].as_int64() > std::numeric_limits<int32_t>::max();
    if (negative || huge) {
      const std::string got = a[i].is_uint64() ? std::to_string(a[i].as_uint64()) : std::to_string(a[i].as_int64());
      out_of_range(p, "a token id from 0 to " + std::to_string(std::numeric_limits<int32_t>::max()) + ", got " + got);
    }
    out.push_back(static_cast<int32_t>(a[i].as_int64()));
  }
  return out;
}

void read_prompts(const json::object& o, const std::string& key, int32_t max_batch, std::vector<std::string>& texts,
                  std::vector<std::vector<int32_t>>& token_lists) {
  const json::value* v = field(o, key);
  if (v == nullptr) throw invalid_field(key, "'" + key + "' is required", "missing_field");
  if (v->is_string()) {
    texts.emplace_back(v->as_string().data(), v->as_string().size());
    return;
  }
  if (!v->is_array()) wrong_type(key, "a string or an array", *v);
  const json::array& a = v->as_array();
  if (a.empty()) throw invalid_field(key, "'" + key + "' must not be an empty array");
  if (a[0].is_int64() || a[0].is_uint64()) {
    token_lists.push_back(token_list(a, key));
    return;
  }
  const std::string items = key == "prompt" ? "prompts" : "inputs";
  if (a.size() > static_cast<size_t>(max_batch)) {
    out_of_range(key, "a batch of at most " + std::to_string(max_batch) + " " + items);
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string p = key + "[" + std::to_string(i) + "]";
    if (a[i].is_string()) {
      if (!token_lists.empty()) wrong_type(p, ("an array of token ids like the other " + items).c_str(), a[i]);
      texts.emplace_back(a[i].as_string().data(), a[i].as_string().size());
    } else if (a[i].is_array()) {
      if (!texts.empty()) wrong_type(p, ("a string like the other " + items).c_str(), a[i]);
      if (a[i].as_array().empty()) throw invalid_field(p, "'" + p + "' must not be empty");
      token_lists.push_back(token_list(a[i].as_array(), p));
    } else {
      wrong_type(p, "a string or an array of token ids", a[i]);
    }
  }
}

}  // namespace troupe::net
