#include "net/score_request.hpp"

#include <limits>

#include "net/api_error.hpp"
#include "net/request_field.hpp"

namespace troupe::net {
namespace {

namespace json = boost::json;

std::string string_of(const json::value& v, const std::string& param) {
  if (!v.is_string()) wrong_type(param, "a string", v);
  return std::string(v.as_string().data(), v.as_string().size());
}

// A string, or an array of 1..max_items strings.
std::vector<std::string> texts(const json::object& o, const char* key, int32_t max_items) {
  const json::value* v = field(o, key);
  if (v == nullptr) throw invalid_field(key, std::string("'") + key + "' is required", "missing_field");
  if (v->is_string()) return {string_of(*v, key)};
  if (!v->is_array()) wrong_type(key, "a string or an array of strings", *v);
  const json::array& a = v->as_array();
  if (a.empty()) throw invalid_field(key, std::string("'") + key + "' must not be an empty array");
  if (a.size() > static_cast<size_t>(max_items)) {
    out_of_range(key, "an array of at most " + std::to_string(max_items) + " texts");
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < a.size(); ++i)
    out.push_back(string_of(a[i], std::string(key) + "[" + std::to_string(i) + "]"));
  return out;
}

void read_common(const json::object& o, ScoreRequest& r) {
  if (auto m = get_string(o, "model")) r.model = *m;
  if (auto t = get_int(o, "truncate_prompt_tokens", -1, std::numeric_limits<int32_t>::max())) {
    if (*t == 0) out_of_range("truncate_prompt_tokens", "-1 (the context) or a positive number of tokens");
    r.truncate = static_cast<int32_t>(*t);
  }
  (void)get_string(o, "user");  // an end-user id: checked, not used
}

}  // namespace

ScoreRequest parse_rerank_request(std::string_view body, int32_t max_pairs) {
  const json::object o = parse_object(body, "the request body");
  ScoreRequest r;
  r.rerank = true;
  read_common(o, r);
  const json::value* q = field(o, "query");
  if (q == nullptr) throw invalid_field("query", "'query' is required", "missing_field");
  r.first = {string_of(*q, "query")};
  const json::value* d = field(o, "documents");
  if (d == nullptr) throw invalid_field("documents", "'documents' is required", "missing_field");
  if (!d->is_array()) wrong_type("documents", "an array", *d);
  const json::array& docs = d->as_array();
  if (docs.empty()) throw invalid_field("documents", "'documents' must not be an empty array");
  if (docs.size() > static_cast<size_t>(max_pairs)) {
    out_of_range("documents", "an array of at most " + std::to_string(max_pairs) + " documents");
  }
  // A document is a string or, as Cohere and Jina also take it, {"text": ...}.
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::string p = "documents[" + std::to_string(i) + "]";
    if (docs[i].is_object()) {
      const json::value* t = field(docs[i].as_object(), "text");
      if (t == nullptr) throw invalid_field(p + ".text", "'" + p + ".text' is required", "missing_field");
      r.second.push_back(string_of(*t, p + ".text"));
    } else {
      if (!docs[i].is_string()) wrong_type(p, "a string or an object with \"text\"", docs[i]);
      r.second.push_back(string_of(docs[i], p));
    }
  }
  if (auto n = get_int(o, "top_n", 0, std::numeric_limits<int32_t>::max())) r.top_n = static_cast<int32_t>(*n);
  if (auto b = get_bool(o, "return_documents")) r.return_documents = *b;
  return r;
}

ScoreRequest parse_score_request(std::string_view body, int32_t max_pairs) {
  const json::object o = parse_object(body, "the request body");
  ScoreRequest r;
  read_common(o, r);
  r.first = texts(o, "text_1", max_pairs);
  r.second = texts(o, "text_2", max_pairs);
  // 1:1, 1:N, or N:N pairwise (vLLM's rules).
  if (r.first.size() != 1 && r.first.size() != r.second.size()) {
    throw invalid_field("text_2", "'text_1' holds " + std::to_string(r.first.size()) + " texts and 'text_2' " +
                                      std::to_string(r.second.size()) +
                                      ": give one text_1 for all, or as many as text_2 (pairwise)");
  }
  return r;
}

}  // namespace troupe::net
