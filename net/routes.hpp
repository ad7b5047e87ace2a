// Routing: a plain function from HttpRequest to a reply or an asynchronous
// reply, with everything the endpoints share (the backend, metrics,
// admission, limits, the API key, the chat template). Knows nothing of
// sockets, so tests drive it directly; net/http_session.cpp and
// net/ws_session.cpp are the transports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "net/admission.hpp"
#include "net/api_error.hpp"
#include "net/embeddings_request.hpp"
#include "net/engine_client.hpp"
#include "net/generation.hpp"
#include "net/http_types.hpp"
#include "net/job_registry.hpp"
#include "net/metrics.hpp"
#include "net/request_parser.hpp"

namespace troupe::net {

struct ServerLimits {
  size_t max_body_bytes = 1 << 20;         // larger bodies: 413
  size_t ws_max_message_bytes = 64 << 10;  // larger WebSocket messages: close 1009
  size_t send_queue_bytes = 4 << 20;       // per connection; a client this far behind is dropped
  int32_t ws_max_requests = 16;            // running at once on one WebSocket
  int32_t max_embedding_inputs = 2048;     // inputs in one /v1/embeddings request (OpenAI's limit)
  int32_t embedding_parallel = 16;         // of those, running in the engine at once
  RequestLimits request;                   // max_tokens, n, stop strings, batch size
};

struct CoreOptions {
  ServerLimits limits;
  AdmissionOptions admission;
  std::string api_key;        // empty: no authentication
};

class ServerCore {
 public:
  ServerCore(EngineClient& backend, CoreOptions options);
  ~ServerCore();
  ServerCore(const ServerCore&) = delete;
  ServerCore& operator=(const ServerCore&) = delete;

  // Every HTTP request that is not a WebSocket upgrade. Never throws.
  RouteResult handle(const HttpRequest& req);

  // A WebSocket upgrade of req.target: nullopt to accept, else the reply
  // refusing it (404 for another path, 401, 503 while loading).
  std::optional<HttpReply> check_upgrade(const HttpRequest& req);

  // The JobSpec of a parsed request: the model name checked, one engine
  // request per choice, defaults filled. The engine checks the prompts.
  // Throws ApiError.
  JobSpec prepare(const ParsedRequest& r, std::string_view endpoint_label, bool check_model);

  // Admits n choices or throws ApiError(429) with Retry-After; applies the
  // degradation cap to the spec's max_new_tokens.
  void admit(JobSpec& spec);

  // Admits n requests or throws ApiError(429) with Retry-After (503 while
  // draining); the admission's cap on max_tokens, if any.
  Admission admit_requests(int32_t n, int32_t max_tokens);

  // An error reply with OpenAI's body, counted in the metrics.
  HttpReply error_reply(const ApiError& e);

  EngineClient& backend() { return backend_; }
  Metrics& metrics() { return metrics_; }
  AdmissionControl& admission() { return admission_; }
  // Every GenerationJob started, for a graceful shutdown (net/server.hpp).
  JobRegistry& jobs() { return jobs_; }
  const CoreOptions& options() const { return options_; }

  // The /metrics text (asks the engine for its counters).
  std::string metrics_text();

 private:
  // The key as "Authorization: Bearer", or as x-api-key (Anthropic's
  // clients); allow_query: the WebSocket upgrade, where a browser cannot
  // set headers and the key may come as ?api_key=.
  bool authorized(const HttpRequest& req, bool allow_query) const;
  RouteResult generate(const HttpRequest& req, Endpoint endpoint);
  // POST /v1/responses (responses_request.hpp, responses_reply.hpp).
  RouteResult responses(const HttpRequest& req);
  RouteResult embeddings(const HttpRequest& req);
  // Refuses a classifier and admits an embeddings batch: the admission
  // slots it takes (its inputs take turns in them).
  int32_t admit_embeddings(const EmbeddingsRequest& r, const ServedModel& served);
  // Ollama's /api/ routes (ollama_routes.cpp), their errors in its shape.
  RouteResult ollama(const HttpRequest& req, std::string_view path);
  // Anthropic's POST /v1/messages and /v1/messages/count_tokens
  // (anthropic_routes.cpp), their errors in its shape.
  RouteResult anthropic(const HttpRequest& req, std::string_view path);
  // POST /v1/rerank (rerank) and /v1/score (score_reply.hpp).
  RouteResult score(const HttpRequest& req, bool rerank);
  // POST /v1/classify (classify_reply.hpp).
  RouteResult classify(const HttpRequest& req);

  EngineClient& backend_;
  CoreOptions options_;
  Metrics metrics_;
  AdmissionControl admission_;
  JobRegistry jobs_;
};

// 503 while loading, or while a stage is down (a failed GPU, a lost remote
// worker): the reason says which.
ApiError not_ready_error(const LoadState& s);

// Runs `route`; what it throws becomes the reply `shape` writes (an
// HttpReply from an ApiError): an ApiError as it is, a troupe::Error (a
// tokenizer's refusal, ...) as the API error of its kind, anything else a
// 500. One rule for every API's routes, each in its own error shape.
template <class Route, class Shape>
RouteResult answer_errors(Route&& route, Shape&& shape) {
  try {
    return route();
  } catch (const ApiError& e) {
    return {.reply = shape(e)};
  } catch (const Error& e) {
    return {.reply = shape(api_error_from(e.code(), e.what()))};
  } catch (const std::exception& e) {
    return {.reply = shape(ApiError(500, std::string("internal error: ") + e.what(), {}, "internal_error"))};
  }
}

// The id of a new response ("cmpl-" / "chatcmpl-" and 24 random characters).
std::string new_response_id(std::string_view prefix);

// Splits "/path?query" and reads one query parameter (percent-decoded).
std::string_view target_path(std::string_view target);
std::optional<std::string> query_param(std::string_view target, std::string_view name);

}  // namespace troupe::net
