// Ollama's /api/ routes on the ServerCore (net/ollama_api.hpp): chat and
// generate through the same preparation, admission and GenerationJob as
// /v1/chat/completions; embeddings through the same engine batch as
// /v1/embeddings; the model's description. Every error, the engine's
// included, in Ollama's shape.
#include <chrono>

#include "net/api_error.hpp"
#include "net/embeddings_reply.hpp"
#include "net/engine_batch_reply.hpp"
#include "net/json_body.hpp"
#include "net/ollama_api.hpp"
#include "net/ollama_chat_request.hpp"
#include "net/ollama_reply.hpp"
#include "net/routes.hpp"

namespace troupe::net {
namespace {

ApiError wrong_method(const HttpRequest& req, std::string_view path) {
  return ApiError(405, req.method + " is not allowed on " + std::string(path), {}, "method_not_allowed");
}

// Ollama answers a model it does not have with a 404.
void check_ollama_model(const std::string& asked, const std::string& served) {
  if (ollama_names_model(asked, served)) return;
  throw ApiError(404, "model '" + asked + "' not found; this server serves '" + served + "'", "model",
                 "model_not_found");
}

}  // namespace

RouteResult ServerCore::ollama(const HttpRequest& req, std::string_view path) {
  const auto start = std::chrono::steady_clock::now();
  const bool get = req.method == "GET";
  const bool post = req.method == "POST";
  const bool embed = path == "/api/embed" || path == "/api/embeddings";
  const bool generation = path == "/api/chat" || path == "/api/generate";
  const bool posted = embed || generation || path == "/api/show";
  auto shaped = [&](const ApiError& e) {
    HttpReply r = ollama_error_reply(error_reply(e), e);
    if (e.status() == 405) r.headers.emplace_back("Allow", posted ? "POST" : "GET");
    return r;
  };
  return answer_errors(
      [&]() -> RouteResult {
        if (path == "/api/version") {
          if (!get) throw wrong_method(req, path);
          return {.reply = json_reply(200, ollama_version_body())};
        }
        if (!authorized(req, /*allow_query=*/false)) {
          throw ApiError(401, "a valid API key is required (Authorization: Bearer <key>)", {}, "invalid_api_key");
        }
        const bool known = posted || path == "/api/tags" || path == "/api/ps";
        if (known && posted != post) throw wrong_method(req, path);
        if (known) {
          if (const LoadState s = backend_.load_state(); !s.ready) throw not_ready_error(s);
        }
        if (path == "/api/tags") {
          return {.reply = json_reply(200, ollama_tags_body({.served = backend_.served_model(),
                                                             .weight_bytes = backend_.memory_pools().weight_bytes}))};
        }
        if (path == "/api/ps") {
          const MemoryPools pools = backend_.memory_pools();
          return {.reply = json_reply(
                      200, ollama_ps_body({.served = backend_.served_model(), .weight_bytes = pools.weight_bytes},
                                          pools.kv_bytes, backend_.load_state().stages))};
        }
        if (path == "/api/show") {
          const std::string asked = parse_ollama_show(req.body);
          const ServedModel served = backend_.served_model();
          check_ollama_model(asked, served.id);
          return {.reply = json_reply(
                      200, ollama_show_body({.served = served, .weight_bytes = backend_.memory_pools().weight_bytes}))};
        }
        if (generation) {
          const bool chat = path == "/api/chat";
          OllamaGenerateRequest g = chat ? parse_ollama_chat(req.body, options_.limits.request)
                                         : parse_ollama_generate(req.body, options_.limits.request);
          const ServedModel served = backend_.served_model();
          check_ollama_model(g.request.model, served.id);
          const ModelInfo& m = served.engine;
          if (m.pooling != Pooling::none || m.n_labels > 0) {
            throw ApiError(400,
                           "\"" + g.request.model + "\" does not support " + (chat ? "chat" : "generate") +
                               ": it makes embeddings (/api/embed) or scores (/v1/rerank)",
                           "model", "model_not_supported");
          }
          if (g.think && !m.reasoning_tags && !m.harmony) {
            throw ApiError(400, "\"" + g.request.model + "\" does not support thinking", "think", "unsupported_value");
          }
          if (g.load_only) return {.reply = json_reply(200, ollama_load_body(chat, g.request.model))};
          JobSpec spec = prepare(g.request, chat ? "ollama_chat" : "ollama_generate", /*check_model=*/false);
          admit(spec);
          return {.async = make_ollama_reply(*this, std::move(spec),
                                             {.chat = chat,
                                              .stream = g.request.stream,
                                              .logprobs = g.logprobs,
                                              .model = g.request.model,
                                              .start = start})};
        }
        if (embed) {
          const bool legacy = path == "/api/embeddings";
          EmbeddingsRequest r = parse_ollama_embed(req.body, legacy, options_.limits.max_embedding_inputs);
          const ServedModel served = backend_.served_model();
          check_ollama_model(r.model, served.id);
          const int32_t slots = admit_embeddings(r, served);
          BatchFinish finish = [legacy, start, model = r.model](std::vector<std::vector<float>> vectors,
                                                                int64_t prompt_tokens) {
            if (legacy) return json_reply(200, ollama_embedding_body(vectors.at(0)));
            const auto ns =
                std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
            return json_reply(200, ollama_embed_body(vectors, model, prompt_tokens, ns.count()));
          };
          return {.async = make_engine_batch_reply(
                      *this, embedding_engine_requests(r, legacy ? "prompt" : "input"), slots, "embeddings",
                      std::move(finish), [this](const ApiError& e) { return ollama_error_reply(error_reply(e), e); })};
        }
        throw ApiError(
            404,
            "no route for " + req.method + " " + std::string(path) +
                ": Troupe's Ollama API has /api/chat, /api/generate, /api/embed, /api/embeddings, /api/show, "
                "/api/tags, /api/ps and /api/version (models are pulled, created and deleted by restarting "
                "the server with another model)",
            {}, "not_found");
      },
      shaped);
}

}  // namespace troupe::net
