// prometheus-cpp behind Metrics: every series is created up front (labelled
// ones with each label value), so a scrape before any traffic already lists
// them all at zero. Engine-side totals (steps, preemptions) arrive as
// cumulative numbers and are turned into counter increments.
#include "net/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>

namespace troupe::net {
namespace {

using prometheus::Counter;
using prometheus::Gauge;
using prometheus::Histogram;

// Exponential bucket bounds from `first`, `factor` apart.
Histogram::BucketBoundaries exp_buckets(double first, double factor, int n) {
  Histogram::BucketBoundaries b;
  double x = first;
  for (int i = 0; i < n; ++i, x *= factor) b.push_back(x);
  return b;
}

// Tokens per second over the last complete seconds: per-second buckets in
// a ring, so a scrape interval does not change the figure.
class RateMeter {
 public:
  void add(int64_t n) {
    std::lock_guard lock(mutex_);
    roll(now_s());
    buckets_[head_ % kSlots] += n;
  }
  double per_second() {
    std::lock_guard lock(mutex_);
    roll(now_s());
    int64_t sum = 0;
    for (int i = 1; i <= kWindow; ++i) sum += buckets_[(head_ + kSlots - i) % kSlots];
    return static_cast<double>(sum) / kWindow;
  }

 private:
  static constexpr int kSlots = 16;
  static constexpr int kWindow = 10;  // seconds averaged, the current one excluded
  static int64_t now_s() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void roll(int64_t now) {
    if (head_ == 0) head_ = now;
    for (int i = 0; head_ < now && i < kSlots; ++i) buckets_[++head_ % kSlots] = 0;
    head_ = std::max(head_, now);
  }
  std::mutex mutex_;
  std::array<int64_t, kSlots> buckets_{};
  int64_t head_ = 0;
};

}  // namespace

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> reg = std::make_shared<prometheus::Registry>();

  prometheus::Family<Counter>& counter(const std::string& name, const std::string& help) {
    return prometheus::BuildCounter().Name(name).Help(help).Register(*reg);
  }
  prometheus::Family<Gauge>& gauge(const std::string& name, const std::string& help) {
    return prometheus::BuildGauge().Name(name).Help(help).Register(*reg);
  }
  Histogram& histogram(const std::string& name, const std::string& help, Histogram::BucketBoundaries b) {
    return prometheus::BuildHistogram().Name(name).Help(help).Register(*reg).Add({}, std::move(b));
  }

  // Latencies (seconds).
  Histogram& ttft =
      histogram("troupe_time_to_first_token_seconds", "Submit to first generated token", exp_buckets(0.001, 2.0, 16));
  Histogram& itl = histogram("troupe_inter_token_latency_seconds", "Gap between consecutive tokens of a request",
                             exp_buckets(0.0002, 2.0, 16));
  Histogram& e2e =
      histogram("troupe_e2e_request_latency_seconds", "Submit to the end of a request", exp_buckets(0.005, 2.0, 17));
  Histogram& queue = histogram("troupe_queue_time_seconds", "Submit to first scheduled", exp_buckets(0.0002, 2.0, 18));
  Histogram& prompt_len =
      histogram("troupe_request_prompt_tokens", "Prompt tokens per request", exp_buckets(1, 2.0, 16));
  Histogram& gen_len =
      histogram("troupe_request_generation_tokens", "Generated tokens per request", exp_buckets(1, 2.0, 16));

  // Counters.
  prometheus::Family<Counter>& requests_f = counter("troupe_requests_total", "Requests accepted, by endpoint");
  prometheus::Family<Counter>& finished_f = counter("troupe_requests_finished_total", "Requests ended, by reason");
  prometheus::Family<Counter>& rejected_f = counter("troupe_requests_rejected_total", "Requests refused, by reason");
  prometheus::Family<Counter>& disconnects_f =
      counter("troupe_client_disconnects_total", "Clients that went away or were dropped, by reason");
  prometheus::Family<Counter>& http_f = counter("troupe_http_responses_total", "HTTP responses, by status class");
  Counter& degraded_c =
      counter("troupe_degraded_requests_total", "Requests admitted with max_tokens capped (load)").Add({});
  Counter& prompt_tokens_c = counter("troupe_prompt_tokens_total", "Prompt tokens submitted").Add({});
  Counter& gen_tokens_c = counter("troupe_generation_tokens_total", "Tokens generated").Add({});
  Counter& preemptions_c = counter("troupe_preemptions_total", "Sequences preempted for KV").Add({});
  Counter& steps_c = counter("troupe_scheduler_steps_total", "Forward steps planned").Add({});
  Counter& prefix_hits_c =
      counter("troupe_prefix_cache_hit_tokens_total", "Prompt tokens found in the prefix cache").Add({});
  prometheus::Family<Counter>& images_f =
      counter("troupe_images_total", "Images of requests, by where their features came from (tower, cache)");
  Counter& images_tower_c = images_f.Add({{"source", "tower"}});
  Counter& images_cache_c = images_f.Add({{"source", "cache"}});
  // Speculative decoding, per proposer (series made at the first scrape
  // that names one).
  prometheus::Family<Counter>& spec_proposed_f = counter(
      "troupe_spec_proposed_tokens_total", "Proposed tokens fed for verification (speculative decoding), by proposer");
  prometheus::Family<Counter>& spec_accepted_f =
      counter("troupe_spec_accepted_tokens_total", "Proposed tokens the target model accepted, by proposer");
  Counter* spec_proposed_c = nullptr;
  Counter* spec_accepted_c = nullptr;

  // Gauges.
  Gauge& ready_g = gauge("troupe_model_ready", "1 once the model is loaded and requests are served").Add({});
  Gauge& load_progress_g = gauge("troupe_model_load_progress", "Model loading progress, 0..1").Add({});
  prometheus::Family<Gauge>& stage_up_f =
      gauge("troupe_stage_up", "1 while an executor stage is up (0: its GPU failed or its remote worker is lost)");
  prometheus::Family<Gauge>& stage_reconnects_f =
      gauge("troupe_stage_reconnects", "Times a remote stage's link came back after being down");
  Gauge& running_g = gauge("troupe_requests_running", "Sequences holding KV").Add({});
  Gauge& waiting_g = gauge("troupe_requests_waiting", "Requests queued in the scheduler").Add({});
  Gauge& in_flight_g = gauge("troupe_requests_in_flight", "Requests admitted by the server, not yet ended").Add({});
  Gauge& breaker_g = gauge("troupe_admission_breaker_open", "1 while new requests are refused (429)").Add({});
  prometheus::Family<Gauge>& kv_f = gauge("troupe_kv_blocks", "KV pages by state");
  Gauge& kv_used_g = kv_f.Add({{"state", "used"}});
  Gauge& kv_free_g = kv_f.Add({{"state", "free"}});
  Gauge& kv_cached_g = kv_f.Add({{"state", "cached"}});
  Gauge& kv_total_g = gauge("troupe_kv_blocks_total", "KV pages in the pool").Add({});
  Gauge& kv_usage_g = gauge("troupe_kv_usage_ratio", "Fraction of KV pages held by sequences").Add({});
  Gauge& prefix_rate_g =
      gauge("troupe_prefix_cache_hit_rate", "Prompt tokens found in the prefix cache / prompt tokens").Add({});
  Gauge& in_rate_g =
      gauge("troupe_prompt_tokens_per_second", "Prompt tokens submitted per second (10 s window)").Add({});
  Gauge& out_rate_g = gauge("troupe_generation_tokens_per_second", "Tokens generated per second (10 s window)").Add({});
  prometheus::Family<Gauge>& pool_f = gauge("troupe_memory_pool_bytes", "Size of the engine's memory pools");
  Gauge& pool_weights_g = pool_f.Add({{"pool", "weights"}});
  Gauge& pool_kv_g = pool_f.Add({{"pool", "kv"}});
  // Labelled with the KV type, so f32 and q8_0 servers read apart.
  prometheus::Family<Gauge>& kv_token_f =
      gauge("troupe_kv_bytes_per_token", "KV cache bytes one token of context takes, over every stage");
  Gauge& pool_kv_used_g =
      gauge("troupe_memory_pool_used_bytes", "Bytes of the KV pool held by sequences").Add({{"pool", "kv"}});
  Gauge& frag_g = gauge("troupe_kv_fragmentation_ratio",
                        "Estimated unused token slots in the KV pages sequences hold (internal fragmentation)")
                      .Add({});
  prometheus::Family<Gauge>& mailbox_f =
      gauge("troupe_actor_mailbox_depth", "Messages waiting in an actor's mailbox");
  prometheus::Family<Counter>& busy_f =
      counter("troupe_actor_busy_seconds_total", "Time an actor spent handling messages");
  prometheus::Family<Counter>& messages_f = counter("troupe_actor_messages_total", "Messages an actor has handled");
  prometheus::Family<Counter>& anomalies_f =
      counter("troupe_anomalies_total", "TTFT or step-time excursions above the metric's running baseline");
  Gauge& kv_peak_g = gauge("troupe_kv_blocks_peak", "Most KV pages ever held by sequences at once").Add({});
  prometheus::Family<Gauge>& busy_ratio_f =
      gauge("troupe_actor_busy_ratio", "Fraction of the trace window an actor spent handling messages (tracing on)");
  prometheus::Family<Gauge>& wait_f =
      gauge("troupe_actor_mailbox_wait_seconds", "Time messages waited in an actor's mailbox, by quantile (tracing on)");
  std::map<std::string, std::pair<Counter*, uint64_t>, std::less<>> anomalies;  // metric -> series, last count
  prometheus::Family<Gauge>& conns_f = gauge("troupe_open_connections", "Open client connections, by kind");
  Gauge& conns_http_g = conns_f.Add({{"kind", "http"}});
  Gauge& conns_ws_g = conns_f.Add({{"kind", "websocket"}});

  std::map<std::string, Counter*, std::less<>> requests;
  std::array<Counter*, 4> finished{};
  std::array<Counter*, 7> rejected{};
  std::array<Counter*, 3> disconnects{};
  std::array<Counter*, 5> http{};  // 1xx..5xx

  RateMeter in_rate, out_rate;
  std::atomic<int64_t> kv_tokens{0};  // tokens of requests past their first token (in KV)
  std::mutex scrape_mutex;            // one scrape at a time (the engine deltas)
  uint64_t last_steps = 0, last_preemptions = 0, last_prefix_hits = 0, last_spec_proposed = 0, last_spec_accepted = 0,
           last_images_tower = 0, last_images_cache = 0;
  struct ActorSeries {
    Gauge* mailbox = nullptr;
    Counter* busy = nullptr;
    Counter* messages = nullptr;
    double last_busy = 0;
    uint64_t last_messages = 0;
  };
  std::map<std::string, ActorSeries, std::less<>> actors;  // created at the first scrape that names them

  // Data-parallel replicas (net/replica_router.hpp), labelled by index.
  prometheus::Family<Gauge>& replica_up_f =
      gauge("troupe_replica_up", "1 while a data-parallel replica serves (loaded, every stage up)");
  prometheus::Family<Gauge>& replica_in_flight_f =
      gauge("troupe_replica_requests_in_flight", "Requests routed to a replica, not yet ended");
  prometheus::Family<Counter>& replica_routed_f = counter(
      "troupe_replica_routed_total", "Requests routed to a replica, by reason (affinity: it holds the prompt's prefix)");
  struct ReplicaSeries {
    Counter* affinity = nullptr;
    Counter* least_loaded = nullptr;
    uint64_t last_affinity = 0;
    uint64_t last_least_loaded = 0;
  };
  std::map<int32_t, ReplicaSeries> replicas;  // created at the first scrape that names them

  Impl() {
    for (const char* e : {"completions", "chat", "websocket", "embeddings", "rerank", "score", "classify",
                          "ollama_chat", "ollama_generate", "messages", "responses"}) {
      requests[e] = &requests_f.Add({{"endpoint", e}});
    }
    const char* fin[] = {"stop", "length", "cancelled", "error"};
    for (size_t i = 0; i < finished.size(); ++i) finished[i] = &finished_f.Add({{"reason", fin[i]}});
    const char* rej[] = {"overload", "invalid", "unauthorized", "too_large", "not_ready", "cancelled", "internal"};
    for (size_t i = 0; i < rejected.size(); ++i) rejected[i] = &rejected_f.Add({{"reason", rej[i]}});
    const char* dis[] = {"closed", "slow_reader", "message_too_big"};
    for (size_t i = 0; i < disconnects.size(); ++i) disconnects[i] = &disconnects_f.Add({{"reason", dis[i]}});
    const char* cls[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
    for (size_t i = 0; i < http.size(); ++i) http[i] = &http_f.Add({{"code", cls[i]}});
  }
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {}
Metrics::~Metrics() = default;

void Metrics::request_started(std::string_view endpoint, int32_t prompt_tokens) {
  if (auto it = impl_->requests.find(endpoint); it != impl_->requests.end()) it->second->Increment();
  impl_->prompt_tokens_c.Increment(prompt_tokens);
  impl_->in_rate.add(prompt_tokens);
  impl_->prompt_len.Observe(prompt_tokens);
}

void Metrics::first_token(int32_t prompt_tokens) { impl_->kv_tokens += prompt_tokens; }

void Metrics::token(double seconds_since_previous) {
  impl_->gen_tokens_c.Increment();
  impl_->out_rate.add(1);
  ++impl_->kv_tokens;
  if (seconds_since_previous >= 0) impl_->itl.Observe(seconds_since_previous);
}

void Metrics::request_ended(const FinalEvent& f) {
  impl_->finished[static_cast<size_t>(f.reason)]->Increment();
  if (f.first_token_seconds > 0) {
    impl_->ttft.Observe(f.first_token_seconds);
    impl_->kv_tokens -= f.prompt_tokens + f.completion_tokens;
  }
  impl_->e2e.Observe(f.total_seconds);
  impl_->queue.Observe(f.queue_seconds);
  if (f.embedding.empty()) impl_->gen_len.Observe(f.completion_tokens);  // an embedding generates nothing
}

void Metrics::rejected(RejectReason r) { impl_->rejected[static_cast<size_t>(r)]->Increment(); }
void Metrics::disconnected(DisconnectReason r) { impl_->disconnects[static_cast<size_t>(r)]->Increment(); }
void Metrics::degraded() { impl_->degraded_c.Increment(); }

void Metrics::http_response(int status) {
  const int cls = status / 100;
  if (cls >= 1 && cls <= 5) impl_->http[static_cast<size_t>(cls - 1)]->Increment();
}

void Metrics::connection_opened(ConnectionKind k) {
  (k == ConnectionKind::http ? impl_->conns_http_g : impl_->conns_ws_g).Increment();
}
void Metrics::connection_closed(ConnectionKind k) {
  (k == ConnectionKind::http ? impl_->conns_http_g : impl_->conns_ws_g).Decrement();
}

std::string Metrics::render(const EngineSnapshot& snap) {
  Impl& m = *impl_;
  std::lock_guard lock(m.scrape_mutex);
  m.ready_g.Set(snap.load.ready ? 1 : 0);
  m.load_progress_g.Set(snap.load.progress);
  for (const StageHealth& h : snap.load.stages) {
    const std::map<std::string, std::string> labels{{"stage", h.name}, {"where", h.where}};
    m.stage_up_f.Add(labels).Set(h.up ? 1 : 0);
    m.stage_reconnects_f.Add(labels).Set(static_cast<double>(h.reconnects));
  }
  m.in_flight_g.Set(snap.in_flight);
  m.breaker_g.Set(snap.breaker_open ? 1 : 0);
  m.in_rate_g.Set(m.in_rate.per_second());
  m.out_rate_g.Set(m.out_rate.per_second());
  m.pool_weights_g.Set(static_cast<double>(snap.pools.weight_bytes));
  m.pool_kv_g.Set(static_cast<double>(snap.pools.kv_bytes));
  if (snap.pools.kv_token_bytes > 0) {
    m.kv_token_f.Add({{"kv_type", snap.pools.kv_type}}).Set(static_cast<double>(snap.pools.kv_token_bytes));
  }
  if (snap.have_stats) {
    const PipelineStats& s = snap.stats;
    m.running_g.Set(s.running);
    m.waiting_g.Set(s.waiting);
    m.kv_used_g.Set(s.kv_blocks_used);
    m.kv_free_g.Set(s.kv_blocks_free);
    m.kv_cached_g.Set(s.kv_blocks_cached);
    m.kv_total_g.Set(s.kv_blocks_total);
    const double usage = s.kv_blocks_total > 0 ? static_cast<double>(s.kv_blocks_used) / s.kv_blocks_total : 0.0;
    m.kv_usage_g.Set(usage);
    m.pool_kv_used_g.Set(usage * static_cast<double>(snap.pools.kv_bytes));
    m.prefix_rate_g.Set(s.prefix_hit_rate);
    // Slots in held pages minus tokens known to sit in them; prefix sharing
    // can make the estimate negative, hence the clamp.
    const double slots = static_cast<double>(s.kv_blocks_used) * snap.pools.kv_block_size;
    const double tokens = static_cast<double>(m.kv_tokens.load());
    m.frag_g.Set(slots > 0 ? std::clamp(1.0 - tokens / slots, 0.0, 1.0) : 0.0);
    auto advance = [](Counter& c, uint64_t now, uint64_t& last) {
      if (now > last) c.Increment(static_cast<double>(now - last));
      last = std::max(last, now);
    };
    advance(m.steps_c, s.steps, m.last_steps);
    advance(m.preemptions_c, s.preemptions, m.last_preemptions);
    advance(m.prefix_hits_c, s.prefix_hit_tokens, m.last_prefix_hits);
    advance(m.images_tower_c, s.images_encoded, m.last_images_tower);
    advance(m.images_cache_c, s.image_cache_hits, m.last_images_cache);
    if (!s.spec_proposer.empty() && m.spec_proposed_c == nullptr) {
      m.spec_proposed_c = &m.spec_proposed_f.Add({{"proposer", s.spec_proposer}});
      m.spec_accepted_c = &m.spec_accepted_f.Add({{"proposer", s.spec_proposer}});
    }
    if (m.spec_proposed_c != nullptr) {
      advance(*m.spec_proposed_c, s.spec_proposed, m.last_spec_proposed);
      advance(*m.spec_accepted_c, s.spec_accepted, m.last_spec_accepted);
    }
    m.kv_peak_g.Set(s.kv_blocks_peak);
  }
  for (const auto& [metric, count] : snap.anomalies) {
    auto it = m.anomalies.find(metric);
    if (it == m.anomalies.end()) it = m.anomalies.emplace(metric, std::make_pair(&m.anomalies_f.Add({{"metric", metric}}), uint64_t{0})).first;
    if (count > it->second.second) it->second.first->Increment(static_cast<double>(count - it->second.second));
    it->second.second = std::max(it->second.second, count);
  }
  for (const ActorSummary& a : snap.actor_summary) {
    m.busy_ratio_f.Add({{"actor", a.actor}}).Set(a.busy_fraction);
    m.wait_f.Add({{"actor", a.actor}, {"quantile", "0.5"}}).Set(a.wait_p50_us * 1e-6);
    m.wait_f.Add({{"actor", a.actor}, {"quantile", "0.99"}}).Set(a.wait_p99_us * 1e-6);
  }
  for (const ActorLoad& a : snap.actors) {
    auto it = m.actors.find(a.actor);
    if (it == m.actors.end()) {
      Impl::ActorSeries s{.mailbox = &m.mailbox_f.Add({{"actor", a.actor}}),
                          .busy = &m.busy_f.Add({{"actor", a.actor}}),
                          .messages = &m.messages_f.Add({{"actor", a.actor}})};
      it = m.actors.emplace(a.actor, s).first;
    }
    Impl::ActorSeries& s = it->second;
    s.mailbox->Set(static_cast<double>(a.mailbox_depth));
    if (a.busy_seconds > s.last_busy) s.busy->Increment(a.busy_seconds - s.last_busy);
    s.last_busy = std::max(s.last_busy, a.busy_seconds);
    if (a.messages > s.last_messages) s.messages->Increment(static_cast<double>(a.messages - s.last_messages));
    s.last_messages = std::max(s.last_messages, a.messages);
  }
  for (const ReplicaFacts& r : snap.replicas) {
    const std::string index = std::to_string(r.index);
    m.replica_up_f.Add({{"replica", index}}).Set(r.up ? 1 : 0);
    m.replica_in_flight_f.Add({{"replica", index}}).Set(r.in_flight);
    auto it = m.replicas.find(r.index);
    if (it == m.replicas.end()) {
      Impl::ReplicaSeries s{.affinity = &m.replica_routed_f.Add({{"replica", index}, {"reason", "affinity"}}),
                            .least_loaded = &m.replica_routed_f.Add({{"replica", index}, {"reason", "least_loaded"}})};
      it = m.replicas.emplace(r.index, s).first;
    }
    Impl::ReplicaSeries& s = it->second;
    auto advance = [](Counter& c, uint64_t now, uint64_t& last) {
      if (now > last) c.Increment(static_cast<double>(now - last));
      last = std::max(last, now);
    };
    advance(*s.affinity, r.routed_affinity, s.last_affinity);
    advance(*s.least_loaded, r.routed_least_loaded, s.last_least_loaded);
  }
  return prometheus::TextSerializer().Serialize(m.reg->Collect());
}

}  // namespace troupe::net
