// The readers of one request field, shared by the endpoints' parsers
// (request_parser.cpp, embeddings_request.cpp, request_tools.cpp). Absent
// and null are the same for optional fields, as in OpenAI's API; every
// error is an ApiError(400) naming the field as the client wrote it.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::net {

inline const boost::json::value* field(const boost::json::object& o, std::string_view key) {
  const boost::json::value* v = o.if_contains(key);
  return (v == nullptr || v->is_null()) ? nullptr : v;
}

[[noreturn]] void wrong_type(const std::string& param, const char* expected, const boost::json::value& got);
[[noreturn]] void out_of_range(const std::string& param, const std::string& range);

inline std::string str(const boost::json::string& s) { return std::string(s.data(), s.size()); }
// o[key], which must be a string: "'param' is required" (missing_field) when
// absent or null.
std::string required_string(const boost::json::object& o, const char* key, const std::string& param);

// The body as a JSON object (`what` names it in the error).
boost::json::object parse_object(std::string_view body, const char* what);

std::optional<bool> get_bool(const boost::json::object& o, const char* key);
// An integer in [lo, hi]; a number with a fraction is a type error.
std::optional<int64_t> get_int(const boost::json::object& o, const char* key, int64_t lo, int64_t hi);
// A finite number in [lo, hi] (or (lo, hi] when lo_open).
std::optional<float> get_number(const boost::json::object& o, const char* key, double lo, double hi,
                                bool lo_open = false);
std::optional<std::string> get_string(const boost::json::object& o, const char* key);
// Token ids in [0, 2^31) (the vocabulary's bound is the engine's rule).
std::vector<int32_t> token_list(const boost::json::array& a, const std::string& param);

// A prompt field ("prompt", "input"): a string, an array of strings (a batch
// of at most max_batch), an array of token ids, or an array of such arrays.
// Exactly one of texts and token_lists is filled.
void read_prompts(const boost::json::object& o, const std::string& key, int32_t max_batch,
                  std::vector<std::string>& texts, std::vector<std::vector<int32_t>>& token_lists);

}  // namespace troupe::net
