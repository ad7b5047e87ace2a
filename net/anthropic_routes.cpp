// Anthropic's Messages API on the ServerCore (net/anthropic_reply.hpp), for
// the clients written against it (the anthropic SDKs, Claude Code, agent
// frameworks): POST /v1/messages through the same preparation, admission
// and GenerationJob as /v1/chat/completions, and /v1/messages/count_tokens
// through the engine's tokenizer actor. Every error in Anthropic's shape.
#include "net/anthropic_reply.hpp"
#include "net/anthropic_request.hpp"
#include "net/api_error.hpp"
#include "net/routes.hpp"

namespace troupe::net {

RouteResult ServerCore::anthropic(const HttpRequest& req, std::string_view path) {
  auto shaped = [&](const ApiError& e) {
    HttpReply r = anthropic_error_reply(error_reply(e), e);
    if (e.status() == 405) r.headers.emplace_back("Allow", "POST");
    return r;
  };
  return answer_errors(
      [&]() -> RouteResult {
        if (!authorized(req, /*allow_query=*/false)) {
          throw ApiError(401, "a valid API key is required (x-api-key or Authorization: Bearer)", {},
                         "invalid_api_key");
        }
        if (req.method != "POST") {
          throw ApiError(405, req.method + " is not allowed on " + std::string(path), {}, "method_not_allowed");
        }
        if (const LoadState s = backend_.load_state(); !s.ready) throw not_ready_error(s);
        const bool count = path == "/v1/messages/count_tokens";
        AnthropicRequest a = count ? parse_anthropic_count_tokens(req.body, options_.limits.request)
                                   : parse_anthropic_messages(req.body, options_.limits.request);
        const ServedModel served = backend_.served_model();
        // Anthropic's clients name Anthropic's models by default: the name
        // must be the served id (Claude Code: ANTHROPIC_MODEL and
        // ANTHROPIC_SMALL_FAST_MODEL), so that a wrong one is an error, not a
        // silent substitute.
        if (a.request.model != served.id) {
          throw ApiError(404,
                         "model: '" + a.request.model + "' is not served here; this server serves '" + served.id + "'",
                         "model", "model_not_found");
        }
        const ModelInfo& m = served.engine;
        if (m.pooling != Pooling::none || m.n_labels > 0) {
          throw ApiError(400, "the model '" + served.id + "' makes embeddings or scores, not messages", "model",
                         "model_not_supported");
        }
        if (a.thinking && !m.reasoning_tags && !m.harmony) {
          throw ApiError(400, "the model '" + served.id + "' does not think: 'thinking' cannot be enabled", "thinking",
                         "unsupported_value");
        }
        if (count) return {.async = make_anthropic_count_reply(*this, std::move(a.request.chat))};
        JobSpec spec = prepare(a.request, "messages", /*check_model=*/false);
        // max_tokens is a bound, not a demand: the reply ends where the context
        // does (stop_reason max_tokens).
        for (PreparedChoice& c : spec.choices) c.request.fit_max_tokens = true;
        admit(spec);
        return {.async = make_anthropic_reply(*this, std::move(spec), a.request.stream, a.request.model)};
      },
      shaped);
}

}  // namespace troupe::net
