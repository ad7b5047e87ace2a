// Ollama's /api/ routes on the ServerCore (net/ollama_api.hpp): embeddings
// through the same engine batch as /v1/embeddings, the model list and the
// version. Every error, the engine's included, in Ollama's shape.
#include <chrono>
#include <exception>

#include "core/error.hpp"
#include "net/api_error.hpp"
#include "net/embeddings_reply.hpp"
#include "net/engine_batch_reply.hpp"
#include "net/json_body.hpp"
#include "net/ollama_api.hpp"
#include "net/routes.hpp"

namespace troupe::net {
namespace {

ApiError wrong_method(const HttpRequest& req, std::string_view path) {
  return ApiError(405, req.method + " is not allowed on " + std::string(path), {}, "method_not_allowed");
}

}  // namespace

RouteResult ServerCore::ollama(const HttpRequest& req, std::string_view path) {
  const bool get = req.method == "GET";
  const bool post = req.method == "POST";
  const bool embed = path == "/api/embed" || path == "/api/embeddings";
  auto shaped = [&](const ApiError& e) {
    HttpReply r = ollama_error_reply(error_reply(e), e);
    if (e.status() == 405) r.headers.emplace_back("Allow", embed ? "POST" : "GET");
    return RouteResult{.reply = std::move(r)};
  };
  try {
    if (path == "/api/version") {
      if (!get) throw wrong_method(req, path);
      return {.reply = json_reply(200, ollama_version_body())};
    }
    if (!authorized(req.authorization, req.target, /*allow_query=*/false)) {
      throw ApiError(401, "a valid API key is required (Authorization: Bearer <key>)", {}, "invalid_api_key");
    }
    if (path == "/api/tags") {
      if (!get) throw wrong_method(req, path);
      if (const LoadState s = backend_.load_state(); !s.ready) throw not_ready_error(s);
      return {.reply = json_reply(200, ollama_tags_body(backend_.served_model()))};
    }
    if (embed) {
      if (!post) throw wrong_method(req, path);
      if (const LoadState s = backend_.load_state(); !s.ready) throw not_ready_error(s);
      const bool legacy = path == "/api/embeddings";
      EmbeddingsRequest r = parse_ollama_embed(req.body, legacy, options_.limits.max_embedding_inputs);
      const ServedModel served = backend_.served_model();
      if (!ollama_names_model(r.model, served.id)) {
        throw ApiError(404, "model '" + r.model + "' not found; this server serves '" + served.id + "'", "model",
                       "model_not_found");
      }
      const int32_t slots = admit_embeddings(r, served);
      const auto start = std::chrono::steady_clock::now();
      BatchFinish finish = [legacy, start, model = r.model](std::vector<std::vector<float>> vectors,
                                                            int64_t prompt_tokens) {
        if (legacy) return json_reply(200, ollama_embedding_body(vectors.at(0)));
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
        return json_reply(200, ollama_embed_body(vectors, model, prompt_tokens, ns.count()));
      };
      return {.async = make_engine_batch_reply(
                  *this, embedding_engine_requests(r, legacy ? "prompt" : "input"), slots, "embeddings",
                  std::move(finish), [this](const ApiError& e) { return ollama_error_reply(error_reply(e), e); })};
    }
    throw ApiError(404,
                   "no route for " + req.method + " " + std::string(path) +
                       ": Troupe's Ollama API has /api/embed, /api/embeddings, /api/tags and /api/version (for chat "
                       "and completions, /v1/chat/completions and /v1/completions)",
                   {}, "not_found");
  } catch (const ApiError& e) {
    return shaped(e);
  } catch (const Error& e) {
    return shaped(api_error_from(e.code(), e.what()));
  } catch (const std::exception& e) {
    return shaped(ApiError(500, std::string("internal error: ") + e.what(), {}, "internal_error"));
  }
}

}  // namespace troupe::net
