#include "net/embeddings_request.hpp"

#include <limits>

#include "net/api_error.hpp"
#include "net/request_field.hpp"

namespace troupe::net {

EmbeddingsRequest parse_embeddings_request(std::string_view body, int32_t max_inputs) {
  const boost::json::object o = parse_object(body, "the request body");
  EmbeddingsRequest r;
  if (auto m = get_string(o, "model")) r.model = *m;
  read_prompts(o, "input", max_inputs, r.texts, r.token_lists);
  if (auto f = get_string(o, "encoding_format")) {
    if (*f != "float" && *f != "base64") {
      throw invalid_field("encoding_format", "'encoding_format' must be \"float\" or \"base64\", got \"" + *f + "\"",
                          "invalid_value");
    }
    r.base64 = *f == "base64";
  }
  if (auto d = get_int(o, "dimensions", 1, 1 << 20)) r.dimensions = static_cast<int32_t>(*d);
  if (auto n = get_bool(o, "normalize")) r.normalize = *n ? 1 : 0;
  if (auto a = get_bool(o, "add_special_tokens")) r.add_special_tokens = *a;
  // The engine knows the context; -1 asks for it.
  if (auto t = get_int(o, "truncate_prompt_tokens", -1, std::numeric_limits<int32_t>::max())) {
    if (*t == 0) out_of_range("truncate_prompt_tokens", "-1 (the context) or a positive number of tokens");
    r.truncate = static_cast<int32_t>(*t);
  }
  (void)get_string(o, "user");  // OpenAI's end-user id: checked, not used
  return r;
}

}  // namespace troupe::net
