// Routing and the checks every generation shares: authentication,
// readiness, model name, tokenization against the context length, max_tokens
// defaults, admission. The replies of the generation endpoints are in
// net/http_replies.cpp.
#include "net/routes.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <random>

#include "net/api_error.hpp"
#include "net/chat_prompt.hpp"
#include "net/http_replies.hpp"
#include "net/openai_response.hpp"
#include "net/static_assets.hpp"
#include "tokenizer/tokenizer.hpp"

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

// 503 while loading, or while a stage is down (a failed GPU, a lost remote
// worker): the reason says which.
ApiError not_ready_error(const LoadState& s) {
  if (s.loaded) return ApiError(503, "not serving now: " + s.stage, {}, "stage_unavailable").with_retry_after(2);
  return ApiError(503, "the model is still loading", {}, "model_not_ready").with_retry_after(1);
}

std::string json_string(const std::string& s) { return boost::json::serialize(boost::json::value(s)); }

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

HttpReply json_reply(int status, std::string body) {
  return HttpReply{.status = status, .content_type = "application/json", .body = std::move(body)};
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

ServerCore::ServerCore(Backend& backend, CoreOptions options)
    : backend_(backend), options_(std::move(options)), admission_(options_.admission) {}

ServerCore::~ServerCore() = default;

bool ServerCore::authorized(std::string_view authorization, std::string_view target, bool allow_query) const {
  if (options_.api_key.empty()) return true;
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
      metrics_.rejected(RejectReason::not_ready);
      break;
    default:
      break;
  }
  HttpReply r = json_reply(e.status(), error_body(e));
  if (e.retry_after() > 0) r.headers.emplace_back("Retry-After", std::to_string(e.retry_after()));
  if (e.status() == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

const ChatPrompter& ServerCore::prompter() {
  std::lock_guard lock(prompter_mutex_);
  if (!prompter_) prompter_ = std::make_unique<ChatPrompter>(options_.chat_template, backend_.model_info());
  return *prompter_;
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

JobSpec ServerCore::prepare(const ParsedRequest& r, std::string_view endpoint_label, bool check_model_name) {
  if (const LoadState s = backend_.load_state(); !s.ready) throw not_ready_error(s);
  const ModelInfo info = backend_.model_info();
  if (check_model_name && r.model != info.id) {
    throw invalid_field("model", "the model '" + r.model + "' does not exist; this server serves '" + info.id + "'",
                        "model_not_found");
  }
  const Tokenizer& tok = backend_.tokenizer();
  const bool chat = r.endpoint == Endpoint::chat;
  const std::string prompt_param = chat ? "messages" : "prompt";

  // Each distinct prompt: its tokens and the text echo would repeat.
  std::vector<std::pair<std::vector<int32_t>, std::string>> prompts;
  if (chat) {
    prompts.emplace_back(prompter().encode(tok, r.messages), std::string());
  } else if (!r.prompts.empty()) {
    for (const std::string& text : r.prompts) {
      std::vector<int32_t> ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
      if (ids.empty()) {
        if (tok.bos() < 0) throw invalid_field("prompt", "'prompt' must not be empty for this model");
        ids.push_back(tok.bos());
      }
      prompts.emplace_back(std::move(ids), text);
    }
  } else {
    for (size_t p = 0; p < r.token_prompts.size(); ++p) {
      const std::vector<int32_t>& ids = r.token_prompts[p];
      for (size_t j = 0; j < ids.size(); ++j) {
        if (ids[j] >= tok.n_vocab()) {
          const std::string where = r.token_prompts.size() == 1 && r.prompts.empty()
                                        ? "prompt[" + std::to_string(j) + "]"
                                        : "prompt[" + std::to_string(p) + "][" + std::to_string(j) + "]";
          throw invalid_field(where, "token id " + std::to_string(ids[j]) + " is outside the vocabulary (" +
                                         std::to_string(tok.n_vocab()) + " tokens)");
        }
      }
      prompts.emplace_back(ids, r.echo ? tok.decode(ids, false) : std::string());
    }
  }

  JobSpec spec;
  spec.meta = ResponseMeta{.endpoint = r.endpoint,
                           .id = new_response_id(chat ? "chatcmpl-" : "cmpl-"),
                           .created = static_cast<int64_t>(std::time(nullptr)),
                           .model = info.id};
  spec.endpoint_label = std::string(endpoint_label);
  const int32_t ctx = info.context_length;
  const uint64_t seed = r.seed.value_or(random_u64());
  for (auto& [ids, text] : prompts) {
    const auto n_prompt = static_cast<int32_t>(ids.size());
    if (n_prompt >= ctx) {
      throw invalid_field(prompt_param,
                          "the prompt has " + std::to_string(n_prompt) + " tokens but the context holds " +
                              std::to_string(ctx) + " (prompt and completion together)",
                          "context_length_exceeded");
    }
    int32_t max_tokens = 0;
    if (r.max_tokens) {
      max_tokens = *r.max_tokens;
      if (n_prompt + max_tokens > ctx) {
        throw invalid_field("max_tokens",
                            "max_tokens " + std::to_string(max_tokens) + " plus the prompt's " +
                                std::to_string(n_prompt) + " tokens exceed the context of " + std::to_string(ctx) +
                                " tokens",
                            "context_length_exceeded");
      }
    } else {
      const int32_t wanted =
          chat || endpoint_label == "websocket" ? options_.limits.request.max_tokens : kCompletionsDefaultMaxTokens;
      max_tokens = std::min(wanted, ctx - n_prompt);
    }
    spec.prompt_tokens += n_prompt;
    for (int32_t k = 0; k < r.n; ++k) {
      PreparedChoice c{.prompt = ids, .echo = r.echo ? text : std::string(), .params = r.params};
      c.params.max_new_tokens = max_tokens;
      // Choices must differ: each gets its own seed, derived from the request's.
      c.params.sampling.seed = seed + spec.choices.size();
      spec.choices.push_back(std::move(c));
    }
  }
  return spec;
}

void ServerCore::admit(JobSpec& spec) {
  const Admission a = admission_.try_admit(static_cast<int32_t>(spec.choices.size()));
  if (!a.admitted) {
    throw ApiError(429,
                   "the server is at capacity (" + std::to_string(admission_.in_flight()) +
                       " requests in flight); retry after " + std::to_string(a.retry_after) + " s",
                   {}, "rate_limit_exceeded")
        .with_retry_after(a.retry_after);
  }
  if (a.max_tokens_cap > 0) {
    bool capped = false;
    for (PreparedChoice& c : spec.choices) {
      if (c.params.max_new_tokens > a.max_tokens_cap) {
        c.params.max_new_tokens = a.max_tokens_cap;
        capped = true;
      }
    }
    if (capped) metrics_.degraded();
  }
}

RouteResult ServerCore::generate(const HttpRequest& req, Endpoint endpoint) {
  const bool chat = endpoint == Endpoint::chat;
  const ParsedRequest r = chat ? parse_chat_request(req.body, options_.limits.request)
                               : parse_completion_request(req.body, options_.limits.request);
  JobSpec spec = prepare(r, chat ? "chat" : "completions", /*check_model_name=*/true);
  admit(spec);
  return RouteResult{.async = make_generation_reply(*this, std::move(spec), r.stream, r.include_usage)};
}

std::optional<HttpReply> ServerCore::check_upgrade(const HttpRequest& req) {
  if (target_path(req.target) != "/v1/stream") {
    return error_reply(
        ApiError(404, "no WebSocket endpoint at " + std::string(target_path(req.target)), {}, "not_found"));
  }
  if (!authorized(req.authorization, req.target, /*allow_query=*/true)) {
    return error_reply(
        ApiError(401, "a valid API key is required (Authorization: Bearer or ?api_key=)", {}, "invalid_api_key"));
  }
  if (const LoadState s = backend_.load_state(); !s.ready) return error_reply(not_ready_error(s));
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
  try {
    if (path == "/health") {
      if (!get) return method_not_allowed("GET");
      return {.reply = json_reply(200, R"({"status":"ok"})")};
    }
    if (path == "/ready") {
      if (!get) return method_not_allowed("GET");
      const LoadState s = backend_.load_state();
      std::string body = std::string(R"({"status":")") +
                         (s.ready    ? "ready"
                          : s.failed ? "failed"
                          : s.loaded ? "stage_down"
                                     : "loading") +
                         R"(","progress":)" + std::to_string(s.progress) + R"(,"auth_required":)" +
                         (options_.api_key.empty() ? "false" : "true") + R"(,"stages":)" + stages_json(s.stages) +
                         (s.ready ? std::string() : R"(,"reason":)" + json_string(s.stage)) + "}";
      HttpReply r = json_reply(s.ready ? 200 : 503, std::move(body));
      if (!s.ready) r.headers.emplace_back("Retry-After", "1");
      return {.reply = std::move(r)};
    }
    if (path == "/metrics") {
      if (!get) return method_not_allowed("GET");
      return {.reply = HttpReply{
                  .status = 200, .content_type = "text/plain; version=0.0.4; charset=utf-8", .body = metrics_text()}};
    }
    if (path.substr(0, 4) == "/v1/") {
      if (!authorized(req.authorization, req.target, /*allow_query=*/false)) {
        throw ApiError(401, "a valid API key is required (Authorization: Bearer <key>)", {}, "invalid_api_key");
      }
      if (path == "/v1/completions" || path == "/v1/chat/completions") {
        if (!post) return method_not_allowed("POST");
        return generate(req, path == "/v1/chat/completions" ? Endpoint::chat : Endpoint::completions);
      }
      if (path == "/v1/models" || path.substr(0, 11) == "/v1/models/") {
        if (!get) return method_not_allowed("GET");
        if (!backend_.ready())
          throw ApiError(503, "the model is still loading", {}, "model_not_ready").with_retry_after(1);
        const ModelInfo info = backend_.model_info();
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
      return {.reply =
                  HttpReply{.status = 200, .content_type = std::string(a->content_type), .body = std::string(a->body)}};
    }
    throw ApiError(404, "no route for " + req.method + " " + std::string(path), {}, "not_found");
  } catch (const ApiError& e) {
    return {.reply = error_reply(e)};
  } catch (const Error& e) {
    // Tokenizer refusals (invalid UTF-8 in a token prompt's decode, ...).
    return {.reply = error_reply(api_error_from(e.code(), e.what()))};
  } catch (const std::exception& e) {
    return {.reply = error_reply(ApiError(500, std::string("internal error: ") + e.what(), {}, "internal_error"))};
  }
}

}  // namespace troupe::net
