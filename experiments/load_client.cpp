// A thread per open stream, each running one blocking exchange at a time
// (net/http_client.hpp): simple, and at the few hundred streams a latency
// experiment opens the threads cost nothing the server would notice. Open
// loop: the calling thread releases requests at their arrival times into a
// queue the workers drain. Closed loop: each worker takes the next plan
// entry as soon as its previous request ends.
#include "experiments/load_client.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/error.hpp"
#include "net/http_client.hpp"
#include "net/sse_splitter.hpp"

namespace troupe {
namespace {

namespace json = boost::json;
using net::HttpClientRequest;
using net::HttpClientResult;
using net::SseSplitter;
using net::HttpClientHandlers;
using net::http_call;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorBody = 64 << 10;  // of a refusal's body, enough for its message

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string clip(std::string_view s, size_t n = 300) {
  return s.size() <= n ? std::string(s) : std::string(s.substr(0, n)) + "...";
}

std::string completion_body(const PlannedRequest& p, const std::string& model, bool ignore_eos) {
  json::array prompt;
  prompt.reserve(p.prompt.size());
  for (int32_t t : p.prompt) prompt.emplace_back(t);
  json::object o;
  o["model"] = model;
  o["prompt"] = std::move(prompt);
  o["max_tokens"] = p.max_new_tokens;
  o["stream"] = true;
  o["stream_options"] = json::object{{"include_usage", true}};
  o["temperature"] = 0;
  o["ignore_eos"] = ignore_eos;
  // vLLM's integer form, which our parser also takes: 0 is its default, so
  // an interactive request is valid on a vLLM server without priority scheduling.
  o["priority"] = p.priority == Priority::batch ? 1 : 0;
  return json::serialize(o);
}

std::string string_of(const json::value* v) {
  if (v == nullptr || !v->is_string()) return {};
  return std::string(v->as_string().data(), v->as_string().size());
}

int32_t int_of(const json::value* v, int32_t fallback) {
  if (v == nullptr || !v->is_number()) return fallback;
  boost::system::error_code ec;
  const auto x = v->to_number<int64_t>(ec);
  return ec ? fallback : static_cast<int32_t>(x);
}

// OpenAI's {"error": {"message": ...}} (or "error": "..."), else the text itself.
std::string error_message_of(std::string_view body) {
  boost::system::error_code ec;
  const json::value v = json::parse(body, ec);
  if (!ec && v.is_object()) {
    if (const json::value* e = v.as_object().if_contains("error")) {
      if (e->is_string()) return string_of(e);
      if (e->is_object()) {
        std::string m = string_of(e->as_object().if_contains("message"));
        if (!m.empty()) return m;
      }
    }
  }
  return clip(body);
}

// Follows one /v1/completions SSE stream into a record.
class StreamReader {
 public:
  StreamReader(RequestRecord& rec, Clock::time_point t0) : rec_(rec), t0_(t0) {}

  // Every piece of the body, as read. The body is read to its end even
  // after [DONE], so the connection closes cleanly rather than with a reset
  // the server would count as a client leaving.
  bool on_bytes(std::string_view piece) {
    const double now = seconds_since(t0_);
    for (const std::string& data : splitter_.feed(piece)) on_event(data, now);
    return true;
  }

  double done_s = -1;  // when [DONE] or an error event arrived
  std::string error;   // an error event, or a stream that is not what it should be
  std::string finish_reason;
  bool saw_usage = false;

 private:
  void on_event(std::string_view data, double now) {
    if (data == "[DONE]") {
      if (done_s < 0) done_s = now;
      return;
    }
    boost::system::error_code ec;
    const json::value v = json::parse(data, ec);
    if (ec || !v.is_object()) {
      if (error.empty()) error = "a stream event is not a JSON object: " + clip(data);
      return;
    }
    const json::object& o = v.as_object();
    if (const json::value* e = o.if_contains("error"); e != nullptr && !e->is_null()) {
      if (error.empty()) error = "error event: " + error_message_of(data);
      if (done_s < 0) done_s = now;
      return;
    }
    if (const json::value* choices = o.if_contains("choices"); choices != nullptr && choices->is_array()) {
      for (const json::value& c : choices->as_array()) {
        if (!c.is_object()) continue;
        const json::object& choice = c.as_object();
        // Completions carry "text"; chat chunks "delta": {"content"}.
        std::string text = string_of(choice.if_contains("text"));
        if (const json::value* d = choice.if_contains("delta"); d != nullptr && d->is_object()) {
          text += string_of(d->as_object().if_contains("content"));
        }
        if (!text.empty()) {
          if (rec_.first_token_s < 0) rec_.first_token_s = now;
          rec_.token_s.push_back(now);
        }
        std::string fr = string_of(choice.if_contains("finish_reason"));
        if (!fr.empty()) finish_reason = std::move(fr);
      }
    }
    if (const json::value* u = o.if_contains("usage"); u != nullptr && u->is_object()) {
      saw_usage = true;
      rec_.prompt_tokens = int_of(u->as_object().if_contains("prompt_tokens"), rec_.prompt_tokens);
      rec_.output_tokens = int_of(u->as_object().if_contains("completion_tokens"), rec_.output_tokens);
    }
  }

  RequestRecord& rec_;
  const Clock::time_point t0_;
  SseSplitter splitter_;
};

struct Target {
  const LoadClientOptions& options;
  std::string model;
  bool ignore_eos = true;
  Clock::time_point t0;
};

RequestRecord run_one(const PlannedRequest& p, double scheduled_s, const Target& target) {
  RequestRecord rec{.index = p.index,
                    .scheduled_s = scheduled_s,
                    .prompt_tokens = static_cast<int32_t>(p.prompt.size())};
  const LoadClientOptions& o = target.options;
  try {
    const HttpClientRequest req{.host = o.host,
                                .port = o.port,
                                .method = "POST",
                                .target = "/v1/completions",
                                .body = completion_body(p, target.model, target.ignore_eos),
                                .api_key = o.api_key,
                                .timeout_s = o.timeout_s};
    int status = 0;
    std::string refusal;  // the body of a non-200 reply
    StreamReader reader(rec, target.t0);
    rec.sent_s = seconds_since(target.t0);
    const HttpClientResult r =
        http_call(req, HttpClientHandlers{.on_head = [&](int s) { status = s; },
                                          .on_body = [&](std::string_view piece) {
                                            if (status == 200) return reader.on_bytes(piece);
                                            refusal.append(piece.substr(0, kMaxErrorBody - refusal.size()));
                                            return refusal.size() < kMaxErrorBody;
                                          }});
    const double ended = seconds_since(target.t0);
    rec.end_s = reader.done_s >= 0 ? reader.done_s : ended;
    if (r.status == 0) {
      rec.error = r.error;
    } else if (r.status != 200) {
      rec.error = "HTTP " + std::to_string(r.status) + ": " + error_message_of(refusal);
    } else if (!reader.error.empty()) {
      rec.error = reader.error;
    } else if (!r.error.empty()) {
      rec.error = r.error;
    } else if (reader.finish_reason.empty()) {
      rec.error = "the stream ended without a finish_reason";
    }
    rec.ok = rec.error.empty();
    // A server that ignores stream_options: count the chunks instead.
    if (!reader.saw_usage) rec.output_tokens = static_cast<int32_t>(rec.token_s.size());
  } catch (const std::exception& e) {
    rec.ok = false;
    rec.error = std::string("request ") + std::to_string(p.index) + ": " + e.what();
    rec.end_s = seconds_since(target.t0);
  }
  return rec;
}

// The first model id of GET /v1/models; empty when the server cannot say
// (the requests then fail with the server's or the network's own message).
std::string discover_model(const LoadClientOptions& o) {
  std::string body;
  const HttpClientResult r = http_call(
      HttpClientRequest{
          .host = o.host, .port = o.port, .target = "/v1/models", .api_key = o.api_key, .timeout_s = 30},
      body);
  if (!r.error.empty() || r.status != 200) return {};
  boost::system::error_code ec;
  const json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) return {};
  const json::value* data = v.as_object().if_contains("data");
  if (data == nullptr || !data->is_array() || data->as_array().empty() || !data->as_array()[0].is_object()) return {};
  return string_of(data->as_array()[0].as_object().if_contains("id"));
}

// When the plan says to send it: never before the start, never NaN (which
// would break the sort), at most 1e7 s (115 days) so that the conversion to
// clock ticks cannot overflow.
double arrival_of(const PlannedRequest& p) {
  return std::isfinite(p.arrival_s) ? std::clamp(p.arrival_s, 0.0, 1e7) : 0.0;
}

// Plan indices released by the dispatcher, taken by the workers.
class WorkQueue {
 public:
  void push(size_t i) {
    {
      std::lock_guard lock(mutex_);
      items_.push_back(i);
    }
    cv_.notify_one();
  }
  void close() {
    {
      std::lock_guard lock(mutex_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  // False once closed and drained.
  bool pop(size_t& i) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return false;
    i = items_.front();
    items_.pop_front();
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<size_t> items_;
  bool closed_ = false;
};

// Joins the workers however the dispatcher leaves (a thread that cannot be
// started throws), closing the queue first so none waits forever.
struct Workers {
  WorkQueue* queue = nullptr;
  std::vector<std::thread> threads;
  ~Workers() {
    if (queue != nullptr) queue->close();
    for (std::thread& t : threads) t.join();
  }
};

}  // namespace

std::vector<RequestRecord> run_against_server(const std::vector<PlannedRequest>& plan, bool ignore_eos,
                                              int32_t clients, const LoadClientOptions& options) {
  std::vector<RequestRecord> records(plan.size());
  if (plan.empty()) return records;
  std::string model = options.model.empty() ? discover_model(options) : options.model;
  // The run's clock starts after the discovery, which must not delay the plan.
  const Clock::time_point t0 = Clock::now();
  const Target target{.options = options, .model = std::move(model), .ignore_eos = ignore_eos, .t0 = t0};
  const size_t cap = static_cast<size_t>(std::max(1, options.max_connections));

  if (clients > 0) {
    std::atomic<size_t> next{0};
    {
      Workers workers;  // joined at the end of this block, before `records` is returned
      const size_t n = std::min({plan.size(), static_cast<size_t>(clients), cap});
      for (size_t w = 0; w < n; ++w) {
        workers.threads.emplace_back([&] {
          for (size_t i; (i = next.fetch_add(1)) < plan.size();) {
            records[i] = run_one(plan[i], seconds_since(t0), target);
          }
        });
      }
    }
    return records;
  }

  std::vector<size_t> order(plan.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return arrival_of(plan[a]) < arrival_of(plan[b]); });
  WorkQueue queue;
  {
    Workers workers{.queue = &queue};
    for (size_t w = 0; w < std::min(plan.size(), cap); ++w) {
      workers.threads.emplace_back([&] {
        for (size_t i; queue.pop(i);) records[i] = run_one(plan[i], arrival_of(plan[i]), target);
      });
    }
    for (size_t i : order) {
      const std::chrono::duration<double> at(arrival_of(plan[i]));
      std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(at));
      queue.push(i);
    }
  }
  return records;
}

std::map<std::string, double> scrape_metrics(const LoadClientOptions& options) {
  std::string body;
  const HttpClientResult r = http_call(HttpClientRequest{.host = options.host,
                                                         .port = options.port,
                                                         .target = "/metrics",
                                                         .api_key = options.api_key,
                                                         .timeout_s = std::min(options.timeout_s, 60.0)},
                                       body);
  if (!r.error.empty()) throw Error(Errc::io, "scraping metrics: " + r.error);
  if (r.status != 200) {
    throw Error(Errc::io, "scraping metrics: GET " + options.host + ":" + std::to_string(options.port) +
                              "/metrics answered HTTP " + std::to_string(r.status) + ": " + error_message_of(body));
  }
  return parse_metrics_text(body);
}

std::map<std::string, double> parse_metrics_text(std::string_view text) {
  std::map<std::string, double> out;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    // name{label="value, with spaces or \" or }",...} value [timestamp]
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ' && line[i] != '\t') ++i;
    if (i < line.size() && line[i] == '{') {
      bool quoted = false;
      for (++i; i < line.size(); ++i) {
        if (quoted && line[i] == '\\') {
          ++i;
        } else if (line[i] == '"') {
          quoted = !quoted;
        } else if (!quoted && line[i] == '}') {
          break;
        }
      }
      if (i >= line.size()) continue;  // labels never closed
      ++i;
    }
    const std::string key(line.substr(0, i));
    std::string_view rest = line.substr(i);
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    const std::string value(rest.substr(0, rest.find_first_of(" \t\r")));
    if (key.empty() || value.empty()) continue;
    char* end = nullptr;
    const double x = std::strtod(value.c_str(), &end);  // also +Inf, -Inf, NaN
    if (end != value.c_str() + value.size()) continue;
    out[key] = x;
  }
  return out;
}

}  // namespace troupe
