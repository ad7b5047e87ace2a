#include "net/ollama_request.hpp"

#include <optional>
#include <string>

#include "net/api_error.hpp"
#include "net/request_field.hpp"

namespace troupe::net {

EmbeddingsRequest parse_ollama_embed(std::string_view body, bool legacy, int32_t max_inputs) {
  const boost::json::object o = parse_object(body, "the request body");
  EmbeddingsRequest r;
  const std::optional<std::string> model = get_string(o, "model");
  if (!model || model->empty()) throw invalid_field("model", "'model' is required", "missing_field");
  r.model = *model;
  if (legacy) {
    const std::optional<std::string> prompt = get_string(o, "prompt");
    if (!prompt) throw invalid_field("prompt", "'prompt' is required: the text to embed", "missing_field");
    r.texts.push_back(*prompt);
  } else {
    read_prompts(o, "input", max_inputs, r.texts, r.token_lists);
    r.normalize = 1;
    // Ollama cuts an input to the context unless told not to; -1 asks the
    // engine for its context (EmbedParams::truncate).
    r.truncate = get_bool(o, "truncate").value_or(true) ? -1 : 0;
    if (auto d = get_int(o, "dimensions", 1, 1 << 20)) r.dimensions = static_cast<int32_t>(*d);
  }
  if (const auto it = o.find("options"); it != o.end() && !it->value().is_object() && !it->value().is_null()) {
    throw invalid_field("options", "'options' must be an object", "invalid_type");
  }
  if (const auto it = o.find("keep_alive");
      it != o.end() && !it->value().is_string() && !it->value().is_number() && !it->value().is_null()) {
    throw invalid_field("keep_alive", "'keep_alive' must be a duration string or a number of seconds", "invalid_type");
  }
  return r;
}

std::string parse_ollama_show(std::string_view body) {
  const boost::json::object o = parse_object(body, "the request body");
  std::optional<std::string> model = get_string(o, "model");
  if (!model || model->empty()) model = get_string(o, "name");
  if (!model || model->empty()) throw invalid_field("model", "'model' is required", "missing_field");
  return *model;
}

bool ollama_names_model(std::string_view asked, std::string_view served) {
  constexpr std::string_view kLatest = ":latest";
  if (asked == served) return true;
  return asked.size() == served.size() + kLatest.size() && asked.substr(0, served.size()) == served &&
         asked.substr(served.size()) == kLatest;
}

}  // namespace troupe::net
