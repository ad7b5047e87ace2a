#include "net/embeddings_reply.hpp"

#include <bit>
#include <cstring>

#include "core/base64.hpp"
#include "net/engine_batch_reply.hpp"
#include "net/json_body.hpp"

namespace troupe::net {

std::vector<EngineRequest> embedding_engine_requests(const EmbeddingsRequest& request, const std::string& field) {
  std::vector<EngineRequest> requests;
  for (size_t i = 0; i < request.size(); ++i) {
    EngineRequest r;
    if (!request.texts.empty()) {
      r = EngineRequest::from_text({.text = request.texts[i], .add_special = request.add_special_tokens});
    } else {
      r = EngineRequest::from_tokens(request.token_lists[i]);
    }
    r.prompt_field = request.size() > 1 ? field + "[" + std::to_string(i) + "]" : field;
    r.params.embed = {
        .on = true, .normalize = request.normalize, .dimensions = request.dimensions, .truncate = request.truncate};
    requests.push_back(std::move(r));
  }
  return requests;
}

std::shared_ptr<AsyncReply> make_embeddings_reply(ServerCore& core, EmbeddingsRequest request, std::string model_id,
                                                  int32_t slots) {
  const bool base64 = request.base64;
  return make_engine_batch_reply(
      core, embedding_engine_requests(request, "input"), slots, "embeddings",
      [base64, model_id = std::move(model_id)](std::vector<std::vector<float>> vectors, int64_t prompt_tokens) {
        return json_reply(200, embeddings_body(vectors, base64, model_id, prompt_tokens));
      });
}

std::string embeddings_body(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model_id,
                            int64_t prompt_tokens) {
  static_assert(std::endian::native == std::endian::little, "base64 vectors are little-endian float32");
  std::string out = R"({"object":"list","data":[)";
  for (size_t i = 0; i < vectors.size(); ++i) {
    if (i > 0) out += ',';
    out += R"({"object":"embedding","index":)" + std::to_string(i) + R"(,"embedding":)";
    const std::vector<float>& v = vectors[i];
    if (base64) {
      std::string bytes(v.size() * sizeof(float), '\0');
      std::memcpy(bytes.data(), v.data(), bytes.size());
      out += '"' + base64_encode(bytes) + '"';
    } else {
      out += '[';
      for (size_t j = 0; j < v.size(); ++j) {
        if (j > 0) out += ',';
        append_number(out, v[j]);
      }
      out += ']';
    }
    out += '}';
  }
  out += R"(],"model":)" + json_quoted(model_id) + "," + usage_json(prompt_tokens) + "}";
  return out;
}

}  // namespace troupe::net
