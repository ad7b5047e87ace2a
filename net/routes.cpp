// Routing and the checks every generation shares: authentication,
// readiness, model name, tokenization against the context length, max_tokens
// defaults, admission. The replies of the generation endpoints are in
// net/http_replies.cpp.
#include "net/routes.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <ctime>
#include <random>

#include "grammar/tool_call_grammar.hpp"
#include "net/api_error.hpp"
#include "net/classify_reply.hpp"
#include "net/embeddings_reply.hpp"
#include "net/embeddings_request.hpp"
#include "net/http_replies.hpp"
#include "net/json_body.hpp"
#include "net/openai_response.hpp"
#include "net/responses_reply.hpp"
#include "net/responses_request.hpp"
#include "net/score_reply.hpp"
#include "net/score_request.hpp"
#include "net/static_assets.hpp"
#include "net/tokenize_reply.hpp"

namespace troupe::net {
namespace {

// Completions' default when max_tokens is absent (OpenAI's legacy default).
constexpr int32_t kCompletionsDefaultMaxTokens = 16;

std::mutex rng_mutex;
std::mt19937_64& rng() {
  static std::mt19937_64 g{std::random_device{}()};
  return g;
}

uint64_t random_u64() {
  std::lock_guard lock(rng_mutex);
  return rng()();
}

// A request's "model" must be the served id (where it may be left out, when
// it names one).
void check_model_name(const std::string& asked, const std::string& served, bool required = false) {
  if ((asked.empty() && !required) || asked == served) return;
  throw invalid_field("model", "the model '" + asked + "' does not exist; this server serves '" + served + "'",
                      "model_not_found");
}

// [{"name":"executor_0","where":"cuda:0","layers":[0,30],"up":true}, ...]
std::string stages_json(const std::vector<StageHealth>& stages) {
  boost::json::array out;
  for (const StageHealth& h : stages) {
    boost::json::object o;
    o["name"] = h.name;
    o["where"] = h.where;
    o["layers"] = boost::json::array{h.first_layer, h.last_layer};
    o["up"] = h.up;
    if (!h.up) o["error"] = h.error;
    out.push_back(std::move(o));
  }
  return boost::json::serialize(out);
}

// llama-server's GET /lora-adapters: [{"id":0,"path":"a.gguf","scale":1.0}, ...]
std::string lora_adapters_json(const std::vector<LoraAdapterSpec>& adapters) {
  boost::json::array out;
  for (size_t i = 0; i < adapters.size(); ++i) {
    out.push_back(boost::json::object{{"id", i}, {"path", adapters[i].path}, {"scale", adapters[i].scale}});
  }
  return boost::json::serialize(out);
}

// Compares without an early exit, so the time taken does not reveal how
// much of a guessed key was right (the length may leak; it is not secret).
bool same_secret(std::string_view given, std::string_view key) {
  if (key.empty() || given.size() != key.size()) return false;
  unsigned diff = 0;
  for (size_t i = 0; i < key.size(); ++i) {
    diff |= static_cast<unsigned>(static_cast<unsigned char>(given[i]) ^ static_cast<unsigned char>(key[i]));
  }
  return diff == 0;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i] == '+' ? ' ' : s[i]);
    }
  }
  return out;
}

}  // namespace

ApiError not_ready_error(const LoadState& s) {
  if (s.loaded) return ApiError(503, "not serving now: " + s.stage, {}, "stage_unavailable").with_retry_after(2);
  return ApiError(503, "the model is still loading", {}, "model_not_ready").with_retry_after(1);
}

std::string new_response_id(std::string_view prefix) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id(prefix);
  uint64_t bits = 0;
  for (int i = 0; i < 24; ++i) {
    if (i % 10 == 0) bits = random_u64();  // 62^10 < 2^64: ten characters per draw
    id.push_back(kAlphabet[bits % 62]);
    bits /= 62;
  }
  return id;
}

std::string_view target_path(std::string_view target) { return target.substr(0, target.find('?')); }

std::optional<std::string> query_param(std::string_view target, std::string_view name) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const size_t eq = pair.find('=');
    if (percent_decode(pair.substr(0, eq)) == name) {
      return eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return std::nullopt;
}

ServerCore::ServerCore(EngineClient& backend, CoreOptions options)
    : backend_(backend), options_(std::move(options)), admission_(options_.admission) {}

ServerCore::~ServerCore() = default;

bool ServerCore::authorized(const HttpRequest& req, bool allow_query) const {
  if (options_.api_key.empty()) return true;
  if (!req.api_key.empty()) return same_secret(req.api_key, options_.api_key);
  const std::string_view authorization = req.authorization;
  const std::string_view target = req.target;
  // The scheme name is case-insensitive (RFC 9110 section 11.1): "bearer" too.
  constexpr std::string_view kBearer = "bearer ";
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  if (authorization.size() > kBearer.size() &&
      std::equal(kBearer.begin(), kBearer.end(), authorization.begin(),
                 [&](char want, char got) { return want == lower(got); })) {
    return same_secret(authorization.substr(kBearer.size()), options_.api_key);
  }
  if (!allow_query) return false;
  if (auto key = query_param(target, "api_key")) return same_secret(*key, options_.api_key);
  return false;
}

HttpReply ServerCore::error_reply(const ApiError& e) {
  switch (e.status()) {
    case 400:
      metrics_.rejected(RejectReason::invalid);
      break;
    case 401:
      metrics_.rejected(RejectReason::unauthorized);
      break;
    case 413:
      metrics_.rejected(RejectReason::too_large);
      break;
    case 429:
      metrics_.rejected(RejectReason::overload);
      break;
    case 503:
      metrics_.rejected(e.code() == "cancelled" ? RejectReason::cancelled : RejectReason::not_ready);
      break;
    default:
      if (e.status() >= 500) metrics_.rejected(RejectReason::internal);
      break;
  }
  HttpReply r = json_reply(e.status(), error_body(e));
  if (e.retry_after() > 0) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after()));
  if (e.status() == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

std::string ServerCore::metrics_text() {
  EngineSnapshot snap;
  snap.load = backend_.load_state();
  if (snap.load.loaded) {
    try {
      snap.stats = backend_.stats();
      snap.have_stats = true;
    } catch (const Error&) {
      // A scheduler too busy to answer in time: report what the edge knows.
    }
    snap.pools = backend_.memory_pools();
    snap.actors = backend_.actor_loads();
    snap.anomalies = backend_.anomaly_counts();
    snap.actor_summary = backend_.actor_summary();
  }
  snap.replicas = backend_.replicas();
  snap.in_flight = admission_.in_flight();
  snap.breaker_open = admission_.breaker_open();
  return metrics_.render(snap);
}

JobSpec ServerCore::prepare(const ParsedRequest& r, std::string_view endpoint_label, bool check_model) {
  if (const LoadState s = backend_.load_state(); !s.ready) throw not_ready_error(s);
  const ServedModel model = backend_.served_model();
  if (check_model) check_model_name(r.model, model.id, /*required=*/true);
  const bool chat = r.endpoint == Endpoint::chat;
  JobSpec spec;
  spec.meta = ResponseMeta{.endpoint = r.endpoint,
                           .id = new_response_id(chat ? "chatcmpl-" : "cmpl-"),
                           .created = static_cast<int64_t>(std::time(nullptr)),
                           .model = model.id};
  spec.endpoint_label = std::string(endpoint_label);
  spec.tokens_as_ids = r.return_tokens_as_token_ids;

  // Each distinct prompt as the engine takes it; the engine's tokenizer
  // actor renders, encodes and checks it (context, vocab, empty prompt).
  std::vector<PreparedChoice> prompts;
  const bool many = r.prompts.size() + r.token_prompts.size() > 1;
  GenerateParams params = r.params;
  if (chat) {
    prompts.push_back({.request = EngineRequest::from_chat(r.chat)});
    if (model.engine.reasoning_tags) {
      spec.answer.reasoning = JobSpec::ReasoningParsing{.starts_open = model.engine.reasoning_starts_open};
    }
    spec.answer.harmony = model.engine.harmony;
    const ToolChoice& tc = r.tool_choice;
    if (tc.mode != ToolChoice::Mode::none && model.engine.harmony) {
      // Harmony calls are channels the reader finds; no grammar holds the
      // model to one, so a forced choice cannot be kept.
      if (tc.forces()) {
        throw invalid_field("tool_choice",
                            "this model answers in harmony messages (gpt-oss): tool_choice may be \"auto\" or "
                            "\"none\", a call cannot be forced");
      }
      spec.answer.tools = JobSpec::ToolParsing{.syntax = model.engine.tool_call_syntax, .names = tc.names};
    } else if (tc.mode != ToolChoice::Mode::none) {
      const grammar::ToolCallSyntax syntax = model.engine.tool_call_syntax;
      spec.answer.tools = JobSpec::ToolParsing{.syntax = syntax, .names = tc.names};
      // A model that no template taught to call tools (the json syntax)
      // does not know when its calls are done: unless the client asks for
      // parallel calls, a forced choice makes one (llama.cpp's default).
      const bool parallel = tc.parallel.value_or(syntax != grammar::ToolCallSyntax::json);
      if (tc.forces()) {
        params.format = OutputFormat{.kind = OutputFormat::Kind::tool_calls,
                                     .schema = grammar::tool_choice_format(syntax, r.chat.tools_json, tc.function,
                                                                           parallel),
                                     .param = "tools"};
      } else if (!params.format.constrained() && !grammar::tool_call_trigger(syntax).empty()) {
        // "auto": the model may answer in text; a call it opens is held to
        // the tools' schemas from its marker on.
        params.format = OutputFormat{.kind = OutputFormat::Kind::tool_calls,
                                     .schema = grammar::tool_choice_format(syntax, r.chat.tools_json, "", parallel,
                                                                           /*lazy=*/true,
                                                                           model.engine.reasoning_starts_open),
                                     .param = "tools"};
      }
    }
  } else if (!r.prompts.empty()) {
    for (size_t p = 0; p < r.prompts.size(); ++p) {
      PreparedChoice c{.request = EngineRequest::from_text({.text = r.prompts[p], .parse_special = true})};
      if (r.echo) c.echo = r.prompts[p];
      if (many) c.request.prompt_field = "prompt[" + std::to_string(p) + "]";
      prompts.push_back(std::move(c));
    }
  } else {
    for (size_t p = 0; p < r.token_prompts.size(); ++p) {
      PreparedChoice c{.request = EngineRequest::from_tokens(r.token_prompts[p]), .echo_prompt_text = r.echo};
      c.request.return_prompt = r.echo;
      if (many) c.request.prompt_field = "prompt[" + std::to_string(p) + "]";
      prompts.push_back(std::move(c));
    }
  }

  // max_tokens absent: the endpoint's default, cut to what the context
  // leaves after the prompt (the engine knows the prompt's length). Only
  // OpenAI's legacy /v1/completions defaults to 16 tokens.
  const bool fit = !r.max_tokens.has_value();
  const int32_t max_tokens = r.max_tokens                      ? *r.max_tokens
                             : endpoint_label == "completions" ? kCompletionsDefaultMaxTokens
                                                               : options_.limits.request.max_tokens;
  const uint64_t seed = r.seed.value_or(random_u64());
  for (PreparedChoice& prompt : prompts) {
    for (int32_t k = 0; k < r.n; ++k) {
      PreparedChoice c = prompt;
      c.request.params = params;
      c.request.params.max_new_tokens = max_tokens;
      c.request.fit_max_tokens = fit;
      // Choices must differ: each gets its own seed, derived from the request's.
      c.request.params.sampling.seed = seed + spec.choices.size();
      c.counts_prompt = k == 0;
      spec.choices.push_back(std::move(c));
    }
  }
  return spec;
}

void ServerCore::admit(JobSpec& spec) {
  int32_t max_tokens = 0;
  for (const PreparedChoice& c : spec.choices) max_tokens = std::max(max_tokens, c.request.params.max_new_tokens);
  const Admission a = admit_requests(static_cast<int32_t>(spec.choices.size()), max_tokens);
  if (a.max_tokens_cap > 0) {
    bool capped = false;
    for (PreparedChoice& c : spec.choices) {
      if (c.request.params.max_new_tokens > a.max_tokens_cap) {
        c.request.params.max_new_tokens = a.max_tokens_cap;
        capped = true;
      }
    }
    if (capped) metrics_.degraded();
  }
}

Admission ServerCore::admit_requests(int32_t n, int32_t max_tokens) {
  const Admission a = admission_.try_admit(n, max_tokens);
  if (a.draining) {
    throw ApiError(503, "the server is shutting down; retry on another instance", {}, "server_shutting_down")
        .with_retry_after(a.retry_after);
  }
  if (a.kv_bound) {
    throw ApiError(429,
                   "the server is short of KV cache memory (" + std::to_string(admission_.kv_waiting()) +
                       " requests wait for it); retry after " + std::to_string(a.retry_after) +
                       " s, or ask for at most " + std::to_string(admission_.options().degraded_max_tokens) +
                       " tokens",
                   {}, "rate_limit_exceeded")
        .with_retry_after(a.retry_after);
  }
  if (a.wait_bound) {
    throw ApiError(429,
                   "the server is busy: a request now would wait more than " +
                       std::to_string(static_cast<int>(admission_.options().max_queue_seconds)) +
                       " s for a slot; retry after " + std::to_string(a.retry_after) + " s",
                   {}, "rate_limit_exceeded")
        .with_retry_after(a.retry_after);
  }
  if (!a.admitted) {
    throw ApiError(429,
                   "the server is at capacity (" + std::to_string(admission_.in_flight()) +
                       " requests in flight); retry after " + std::to_string(a.retry_after) + " s",
                   {}, "rate_limit_exceeded")
        .with_retry_after(a.retry_after);
  }
  return a;
}

RouteResult ServerCore::embeddings(const HttpRequest& req) {
  if (const LoadState s = backend_.load_state(); !s.ready) throw not_ready_error(s);
  EmbeddingsRequest r = parse_embeddings_request(req.body, options_.limits.max_embedding_inputs);
  const ServedModel served = backend_.served_model();
  check_model_name(r.model, served.id);
  const int32_t slots = admit_embeddings(r, served);
  return RouteResult{.async = make_embeddings_reply(*this, std::move(r), served.id, slots)};
}

int32_t ServerCore::admit_embeddings(const EmbeddingsRequest& r, const ServedModel& served) {
  const std::string& id = served.id;
  if (served.engine.n_labels > 0) {
    throw ApiError(400,
                   "the model '" + id + "' is a cross-encoder (a sequence classifier of " +
                       std::to_string(served.engine.n_labels) +
                       " label(s)): it labels texts at /v1/classify, scores pairs at /v1/rerank and /v1/score "
                       "when it has one label, and makes no embeddings",
                   "model", "model_not_supported");
  }
  // A batch holds a bounded share of the house: its inputs take turns in
  // that many slots.
  const auto slots = static_cast<int32_t>(
      std::min<size_t>(r.size(), static_cast<size_t>(std::max(1, options_.limits.embedding_parallel))));
  admit_requests(slots, 1);
  return slots;
}

RouteResult ServerCore::score(const HttpRequest& req, bool rerank) {
  if (const LoadState s = backend_.load_state(); !s.ready) throw not_ready_error(s);
  const int32_t max_pairs = options_.limits.max_embedding_inputs;
  ScoreRequest r = rerank ? parse_rerank_request(req.body, max_pairs) : parse_score_request(req.body, max_pairs);
  const ServedModel served = backend_.served_model();
  check_model_name(r.model, served.id);
  check_scoring_model(served.engine, served.id);
  // As an embeddings batch: a bounded share of the house, taken in turns.
  const auto slots = static_cast<int32_t>(std::min<size_t>(
      r.size() + r.first.size(), static_cast<size_t>(std::max(1, options_.limits.embedding_parallel))));
  admit_requests(slots, 1);
  return RouteResult{.async = make_score_reply(*this, std::move(r), served.engine, served.id, slots)};
}

RouteResult ServerCore::classify(const HttpRequest& req) {
  if (const LoadState s = backend_.load_state(); !s.ready) throw not_ready_error(s);
  ClassifyRequest r = parse_classify_request(req.body, options_.limits.max_embedding_inputs);
  const ServedModel served = backend_.served_model();
  check_model_name(r.model, served.id);
  check_classifier(served.engine, served.id);
  const auto slots = static_cast<int32_t>(
      std::min<size_t>(r.size(), static_cast<size_t>(std::max(1, options_.limits.embedding_parallel))));
  admit_requests(slots, 1);
  return RouteResult{.async = make_classify_reply(*this, std::move(r), served.engine, served.id, slots)};
}

RouteResult ServerCore::generate(const HttpRequest& req, Endpoint endpoint) {
  const bool chat = endpoint == Endpoint::chat;
  const ParsedRequest r = chat ? parse_chat_request(req.body, options_.limits.request)
                               : parse_completion_request(req.body, options_.limits.request);
  JobSpec spec = prepare(r, chat ? "chat" : "completions", /*check_model=*/true);
  admit(spec);
  return RouteResult{.async = make_generation_reply(*this, std::move(spec), r.stream, r.include_usage)};
}

RouteResult ServerCore::responses(const HttpRequest& req) {
  ResponsesRequest r = parse_responses_request(req.body, options_.limits.request);
  JobSpec spec = prepare(r.request, "responses", /*check_model=*/true);
  admit(spec);
  return RouteResult{.async = make_responses_reply(*this, std::move(spec), r.request.stream, std::move(r.echo_json))};
}

std::optional<HttpReply> ServerCore::check_upgrade(const HttpRequest& req) {
  if (target_path(req.target) != "/v1/stream") {
    return error_reply(
        ApiError(404, "no WebSocket endpoint at " + std::string(target_path(req.target)), {}, "not_found"));
  }
  if (!authorized(req, /*allow_query=*/true)) {
    return error_reply(
        ApiError(401, "a valid API key is required (Authorization: Bearer or ?api_key=)", {}, "invalid_api_key"));
  }
  if (const LoadState s = backend_.load_state(); !s.ready) return error_reply(not_ready_error(s));
  if (admission_.draining()) {
    return error_reply(
        ApiError(503, "the server is shutting down; retry on another instance", {}, "server_shutting_down")
            .with_retry_after(1));
  }
  return std::nullopt;
}

RouteResult ServerCore::handle(const HttpRequest& req) {
  const std::string_view path = target_path(req.target);
  const bool get = req.method == "GET";
  const bool post = req.method == "POST";
  auto method_not_allowed = [&](const char* allow) {
    HttpReply r =
        error_reply(ApiError(405, req.method + " is not allowed on " + std::string(path), {}, "method_not_allowed"));
    r.headers.emplace_back("Allow", allow);
    return RouteResult{.reply = std::move(r)};
  };
  return answer_errors(
      [&]() -> RouteResult {
        if (path == "/health") {
          if (!get) return method_not_allowed("GET");
          return {.reply = json_reply(200, R"({"status":"ok"})")};
        }
        if (path == "/ready") {
          if (!get) return method_not_allowed("GET");
          LoadState s = backend_.load_state();
          // Shutting down: not ready, whatever the engine says.
          const bool draining = admission_.draining();
          if (draining) {
            s.ready = false;
            s.stage = "the server is shutting down";
          }
          std::string body = std::string(R"({"status":")") +
                             (draining   ? "draining"
                              : s.ready  ? "ready"
                              : s.failed ? "failed"
                              : s.loaded ? "stage_down"
                                         : "loading") +
                             R"(","progress":)" + std::to_string(s.progress) + R"(,"auth_required":)" +
                             (options_.api_key.empty() ? "false" : "true") + R"(,"stages":)" + stages_json(s.stages) +
                             (s.ready ? std::string() : R"(,"reason":)" + json_quoted(s.stage)) + "}";
          HttpReply r = json_reply(s.ready ? 200 : 503, std::move(body));
          if (!s.ready) r.headers.emplace_back("Retry-After", "1");
          return {.reply = std::move(r)};
        }
        if (path == "/metrics") {
          if (!get) return method_not_allowed("GET");
          return {.reply = HttpReply{.status = 200,
                                     .content_type = "text/plain; version=0.0.4; charset=utf-8",
                                     .body = metrics_text()}};
        }
        // The adapters (--lora) and their scales, as llama-server lists them.
        // They are set at start: a POST that would change them is refused.
        if (path == "/lora-adapters") {
          if (!authorized(req, /*allow_query=*/false)) {
            throw ApiError(401, "a valid API key is required (Authorization: Bearer <key>)", {}, "invalid_api_key");
          }
          if (!get) {
            HttpReply r = error_reply(ApiError(405,
                                               "LoRA adapters and their scales are set when the server starts "
                                               "(--lora, --lora-scaled); GET lists them",
                                               {}, "method_not_allowed"));
            r.headers.emplace_back("Allow", "GET");
            return {.reply = std::move(r)};
          }
          if (const LoadState s = backend_.load_state(); !s.ready) throw not_ready_error(s);
          return {.reply = json_reply(200, lora_adapters_json(backend_.served_model().lora))};
        }
        if (path == "/tokenize" || path == "/detokenize") {
          if (!authorized(req, /*allow_query=*/false)) {
            throw ApiError(401, "a valid API key is required (Authorization: Bearer <key>)", {}, "invalid_api_key");
          }
          if (!post) return method_not_allowed("POST");
          if (const LoadState s = backend_.load_state(); !s.ready) throw not_ready_error(s);
          TokenizeRequest t = path == "/tokenize" ? parse_tokenize_request(req.body, options_.limits.request)
                                                  : parse_detokenize_request(req.body);
          check_model_name(t.model, backend_.served_model().id);
          return RouteResult{.async = make_tokenize_reply(*this, std::move(t))};
        }
        // vLLM's and llama-server's other spellings of the scoring routes.
        if (path == "/rerank" || path == "/v2/rerank" || path == "/score" || path == "/classify") {
          if (!authorized(req, /*allow_query=*/false)) {
            throw ApiError(401, "a valid API key is required (Authorization: Bearer <key>)", {}, "invalid_api_key");
          }
          if (!post) return method_not_allowed("POST");
          if (path == "/classify") return classify(req);
          return score(req, path != "/score");
        }
        if (path.starts_with("/api/")) return ollama(req, path);
        if (path == "/v1/messages" || path == "/v1/messages/count_tokens") return anthropic(req, path);
        if (path.substr(0, 4) == "/v1/") {
          if (!authorized(req, /*allow_query=*/false)) {
            throw ApiError(401, "a valid API key is required (Authorization: Bearer <key>)", {}, "invalid_api_key");
          }
          if (path == "/v1/completions" || path == "/v1/chat/completions") {
            if (!post) return method_not_allowed("POST");
            return generate(req, path == "/v1/chat/completions" ? Endpoint::chat : Endpoint::completions);
          }
          if (path == "/v1/responses") {
            if (!post) return method_not_allowed("POST");
            return responses(req);
          }
          if (path == "/v1/embeddings") {
            if (!post) return method_not_allowed("POST");
            return embeddings(req);
          }
          if (path == "/v1/classify") {
            if (!post) return method_not_allowed("POST");
            return classify(req);
          }
          if (path == "/v1/rerank" || path == "/v1/score") {
            if (!post) return method_not_allowed("POST");
            return score(req, path == "/v1/rerank");
          }
          if (path == "/v1/models" || path.substr(0, 11) == "/v1/models/") {
            if (!get) return method_not_allowed("GET");
            if (!backend_.ready())
              throw ApiError(503, "the model is still loading", {}, "model_not_ready").with_retry_after(1);
            const ServedModel info = backend_.served_model();
            if (path == "/v1/models") return {.reply = json_reply(200, models_list_json(info.id, info.created))};
            if (path.substr(11) != info.id) {
              throw ApiError(404, "the model '" + std::string(path.substr(11)) + "' does not exist", "model",
                             "model_not_found");
            }
            return {.reply = json_reply(200, model_json(info.id, info.created))};
          }
          if (path == "/v1/stream") {
            HttpReply r = error_reply(
                ApiError(426, "/v1/stream is a WebSocket endpoint: send an Upgrade request", {}, "upgrade_required"));
            r.headers.emplace_back("Upgrade", "websocket");
            return {.reply = std::move(r)};
          }
        }
        if (const StaticAsset* a = find_static_asset(path)) {
          if (!get) return method_not_allowed("GET");
          return {.reply = HttpReply{
                      .status = 200, .content_type = std::string(a->content_type), .body = std::string(a->body)}};
        }
        throw ApiError(404, "no route for " + req.method + " " + std::string(path), {}, "not_found");
      },
      [this](const ApiError& e) { return error_reply(e); });
}

}  // namespace troupe::net
