// The router: load counted per replica by the router itself (+1 on submit,
// -1 on the request's final event), an LRU map from prompt-prefix hashes
// to the replica last sent that prefix, and an id map from the router's
// request ids to (replica, the replica's id) so that cancel reaches the
// right chain.
#include "net/replica_router.hpp"

#include <algorithm>
#include <chrono>

#include "core/error.hpp"
#include "net/pipeline_client.hpp"

namespace troupe::net {
namespace {

std::string replica_prefix(size_t i) { return "replica" + std::to_string(i) + "/"; }

bool loaded(const LoadState& s) { return s.loaded || s.ready; }

}  // namespace

ReplicaRouter::ReplicaRouter(std::vector<std::unique_ptr<EngineClient>> replicas, ReplicaRouting routing)
    : routing_(std::move(routing)), n_replicas_(replicas.size()), counters_(replicas.size()) {
  if (replicas.empty()) throw Error(Errc::invalid_argument, "replicas: at least one is needed");
  replicas_ = std::move(replicas);
  started_.store(true, std::memory_order_release);
}

ReplicaRouter::ReplicaRouter(ReplicaRouterOptions options)
    : routing_(options.routing), n_replicas_(options.replicas.size()), counters_(options.replicas.size()) {
  if (options.replicas.empty()) throw Error(Errc::invalid_argument, "replicas: at least one is needed");
  loader_state_ = {.stage = "loading the model"};
  loader_ = std::thread([this, o = std::move(options)]() mutable { load(std::move(o)); });
}

ReplicaRouter::~ReplicaRouter() {
  stop_ = true;
  if (loader_.joinable()) loader_.join();
  // Before the routing state goes: each replica's teardown ends what still
  // runs, and those final events come through finish().
  replicas_.clear();
}

void ReplicaRouter::load(ReplicaRouterOptions o) {
  auto report = [&](const LoadState& s) {
    {
      std::lock_guard lock(mutex_);
      loader_state_ = s;
    }
    if (o.on_progress) o.on_progress(s);
  };
  try {
    // One model for every replica: its weights are mapped (and, on a
    // device, uploaded per stage) once per process, not once per replica.
    std::shared_ptr<const Model> model = o.replicas.front().model;
    if (!model) {
      report({.progress = 0, .stage = "loading the model"});
      model = Model::load(o.replicas.front().model_path, pipeline_load_options(o.replicas.front()));
    }
    std::vector<std::unique_ptr<EngineClient>> made;
    for (size_t i = 0; i < o.replicas.size() && !stop_; ++i) {
      PipelineConfig cfg = std::move(o.replicas[i]);
      cfg.model = model;
      auto progress = [on = o.on_progress, i](const LoadState& s) {
        if (!on) return;
        LoadState t = s;
        t.stage = "replica " + std::to_string(i) + ": " + s.stage;
        on(t);
      };
      made.push_back(std::make_unique<PipelineClient>(
          PipelineClientOptions{.pipeline = std::move(cfg), .model_id = o.model_id, .on_progress = progress}));
    }
    if (stop_) return;
    replicas_ = std::move(made);
    started_.store(true, std::memory_order_release);
  } catch (const std::exception& e) {
    report({.failed = true, .progress = 0, .stage = e.what()});
  }
}

bool ReplicaRouter::wait_loaded() {
  for (;;) {
    if (started()) {
      bool settled = true, all = true;
      for (const auto& r : replicas_) {
        const LoadState s = r->load_state();
        if (s.failed) {
          all = false;
        } else if (!loaded(s)) {
          settled = false;
        }
      }
      if (settled) return all;
    } else {
      std::lock_guard lock(mutex_);
      if (loader_state_.failed) return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

LoadState ReplicaRouter::load_state() const {
  if (!started()) {
    std::lock_guard lock(mutex_);
    return loader_state_;
  }
  LoadState out{.failed = true};
  std::string waiting;  // the replicas not serving, and why
  for (size_t i = 0; i < replicas_.size(); ++i) {
    const LoadState s = replicas_[i]->load_state();
    out.ready = out.ready || s.ready;
    out.loaded = out.loaded || loaded(s);
    out.failed = out.failed && s.failed;
    out.progress += s.progress / static_cast<double>(replicas_.size());
    for (StageHealth h : s.stages) {
      h.name = replica_prefix(i) + h.name;
      out.stages.push_back(std::move(h));
    }
    if (!s.ready) waiting += (waiting.empty() ? "" : "; ") + ("replica " + std::to_string(i) + ": " + s.stage);
  }
  out.stage = waiting.empty() ? "ready" : waiting;
  return out;
}

std::vector<bool> ReplicaRouter::serving() const {
  std::vector<bool> up(replicas_.size());
  for (size_t i = 0; i < replicas_.size(); ++i) up[i] = replicas_[i]->ready();
  return up;
}

const EngineClient* ReplicaRouter::first_loaded() const {
  if (!started()) return nullptr;
  for (const auto& r : replicas_) {
    if (r->ready()) return r.get();
  }
  for (const auto& r : replicas_) {
    if (loaded(r->load_state())) return r.get();
  }
  return nullptr;
}

ServedModel ReplicaRouter::served_model() const {
  const EngineClient* b = first_loaded();
  if (b == nullptr) throw Error(Errc::internal, "the model is not loaded yet");
  ServedModel info = b->served_model();
  // A request may go to any serving replica: it must fit the smallest.
  for (const auto& r : replicas_) {
    if (r.get() != b && r->ready()) {
      info.engine.context_length = std::min(info.engine.context_length, r->served_model().engine.context_length);
    }
  }
  return info;
}

void ReplicaRouter::tokenize(EngineRequest request, bool detokenize, std::function<void(TokenizeAnswer)> done) {
  // Every replica serves the same model: the first serving one answers.
  const std::vector<bool> up = serving();
  for (size_t i = 0; i < up.size(); ++i) {
    if (up[i]) return replicas_[i]->tokenize(std::move(request), detokenize, std::move(done));
  }
  throw Error(Errc::unavailable, "no replica is serving now");
}

MemoryPools ReplicaRouter::memory_pools() const {
  MemoryPools out;
  if (!started()) return out;
  for (const auto& r : replicas_) {
    const MemoryPools p = r->memory_pools();
    out.weight_bytes = std::max(out.weight_bytes, p.weight_bytes);  // one shared model
    out.kv_bytes += p.kv_bytes;
    if (out.kv_block_size == 0) out.kv_block_size = p.kv_block_size;
    if (out.kv_token_bytes == 0) out.kv_token_bytes = p.kv_token_bytes;
    if (out.kv_type.empty()) out.kv_type = p.kv_type;
  }
  return out;
}

namespace {

// The bytes a prompt starts with, as the router compares prompts: the text,
// the conversation (roles, contents and the rest of each message, tools
// last), or the token ids. The router never tokenizes: that is the
// replicas' tokenizer actors' work.
std::string routing_bytes(const EngineRequest& r) {
  switch (r.kind) {
    case EngineRequest::Kind::text:
      return r.text.text;
    case EngineRequest::Kind::pair:
      return r.text.text + '\n' + r.pair_text;
    case EngineRequest::Kind::chat: {
      std::string out;
      for (const ChatTurn& t : r.chat.messages) {
        out += t.role;
        out += '\n';
        out += t.content;
        out += t.fields_json;
        out += '\n';
      }
      return out + r.chat.tools_json;
    }
    case EngineRequest::Kind::tokens:
      return std::string(reinterpret_cast<const char*>(r.tokens.data()), r.tokens.size() * sizeof(int32_t));
  }
  return {};
}

}  // namespace

std::vector<uint64_t> ReplicaRouter::prefix_keys(const EngineRequest& request) const {
  const std::string bytes = routing_bytes(request);
  std::vector<int32_t> lengths = routing_.prefix_tokens;
  std::sort(lengths.begin(), lengths.end());
  std::vector<uint64_t> keys;
  // FNV-1a over the prompt's bytes, read off at each prefix length (mixed
  // with the length, so a 32-token key never equals a 256-token one). A
  // prefix of n tokens is taken as 4n bytes: about a token's worth of text,
  // and exactly n ids.
  uint64_t h = 1469598103934665603ull;
  size_t pos = 0;
  for (const int32_t n : lengths) {
    const size_t end = static_cast<size_t>(n) * 4;
    if (n <= 0 || end > bytes.size()) continue;
    for (; pos < end; ++pos) {
      h ^= static_cast<uint8_t>(bytes[pos]);
      h *= 1099511628211ull;
    }
    keys.push_back(h ^ (static_cast<uint64_t>(n) * 0x9e3779b97f4a7c15ull));
  }
  std::reverse(keys.begin(), keys.end());
  return keys;
}

std::optional<std::pair<size_t, ReplicaRouter::Reason>> ReplicaRouter::choose(const std::vector<bool>& up,
                                                                                  const std::vector<uint64_t>& keys) {
  std::optional<size_t> least;
  for (size_t i = 0; i < up.size(); ++i) {
    if (up[i] && (!least || counters_[i].in_flight < counters_[*least].in_flight)) least = i;
  }
  if (!least) return std::nullopt;
  // The longest prefix whose replica serves decides; if that replica is
  // too far behind, the least loaded one takes the request instead.
  for (const uint64_t key : keys) {
    const auto it = affinity_.find(key);
    if (it == affinity_.end()) continue;
    const size_t a = it->second->second;
    if (!up[a]) continue;
    if (counters_[a].in_flight <= counters_[*least].in_flight + routing_.affinity_slack) {
      return std::make_pair(a, Reason::affinity);
    }
    break;
  }
  return std::make_pair(*least, Reason::least_loaded);
}

void ReplicaRouter::remember(const std::vector<uint64_t>& keys, size_t replica) {
  if (routing_.affinity_entries == 0) return;
  for (const uint64_t key : keys) {
    if (const auto it = affinity_.find(key); it != affinity_.end()) lru_.erase(it->second);
    lru_.emplace_front(key, replica);
    affinity_[key] = lru_.begin();
    while (lru_.size() > routing_.affinity_entries) {
      affinity_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
}

RequestId ReplicaRouter::submit(EngineRequest request, RequestCallbacks callbacks) {
  if (!started()) throw Error(Errc::unavailable, "the model is not loaded yet");
  // Asked before taking the lock: a replica's load_state takes its own.
  const std::vector<bool> up = serving();
  const std::vector<uint64_t> keys = prefix_keys(request);
  RequestId id = 0;
  size_t r = 0;
  {
    std::lock_guard lock(mutex_);
    const auto pick = choose(up, keys);
    if (!pick) throw Error(Errc::unavailable, "no replica is serving now");
    r = pick->first;
    id = next_id_++;
    Counters& c = counters_[r];
    ++c.in_flight;
    ++(pick->second == Reason::affinity ? c.routed_affinity : c.routed_least_loaded);
    routes_.emplace(id, Route{.replica = r});
    remember(keys, r);
  }
  // The replica's events carry its own id; the caller knows only ours.
  RequestCallbacks wrapped{.on_token =
                               [id, cb = std::move(callbacks.on_token)](const TokenEvent& e) {
                                 if (!cb) return;
                                 TokenEvent out = e;
                                 out.id = id;
                                 cb(out);
                               },
                           .on_final =
                               [this, id, cb = std::move(callbacks.on_final)](const FinalEvent& e) {
                                 finish(id);
                                 if (!cb) return;
                                 FinalEvent out = e;
                                 out.id = id;
                                 cb(out);
                               },
                           .on_prompt =
                               [id, cb = std::move(callbacks.on_prompt)](const PromptEvent& e) {
                                 if (!cb) return;
                                 PromptEvent out = e;
                                 out.id = id;
                                 cb(out);
                               }};
  RequestId inner = 0;
  try {
    // Outside the lock: a replica may end the request (and call finish())
    // before its submit returns.
    inner = replicas_[r]->submit(std::move(request), std::move(wrapped));
  } catch (...) {
    finish(id);
    throw;
  }
  bool cancel_now = false;
  {
    std::lock_guard lock(mutex_);
    if (const auto it = routes_.find(id); it != routes_.end()) {
      it->second.inner = inner;
      cancel_now = it->second.cancel_pending;
    }
  }
  if (cancel_now) replicas_[r]->cancel(inner);
  return id;
}

void ReplicaRouter::cancel(RequestId id) {
  size_t r = 0;
  RequestId inner = 0;
  {
    std::lock_guard lock(mutex_);
    const auto it = routes_.find(id);
    if (it == routes_.end()) return;  // unknown or already ended
    if (!it->second.inner) {
      // Its submit has not returned yet: it forwards the cancel.
      it->second.cancel_pending = true;
      return;
    }
    r = it->second.replica;
    inner = *it->second.inner;
  }
  replicas_[r]->cancel(inner);
}

void ReplicaRouter::finish(RequestId id) {
  std::lock_guard lock(mutex_);
  const auto it = routes_.find(id);
  if (it == routes_.end()) return;
  --counters_[it->second.replica].in_flight;
  routes_.erase(it);
}

size_t ReplicaRouter::tracked_requests() const {
  std::lock_guard lock(mutex_);
  return routes_.size();
}

PipelineStats ReplicaRouter::stats() const {
  if (!started()) throw Error(Errc::internal, "the model is not loaded yet");
  PipelineStats sum;
  bool any = false;
  for (const auto& r : replicas_) {
    if (!loaded(r->load_state())) continue;
    const PipelineStats s = r->stats();
    any = true;
    sum.kv_blocks_total += s.kv_blocks_total;
    sum.kv_blocks_used += s.kv_blocks_used;
    sum.kv_blocks_cached += s.kv_blocks_cached;
    sum.kv_blocks_free += s.kv_blocks_free;
    sum.kv_blocks_peak += s.kv_blocks_peak;
    sum.running += s.running;
    sum.waiting += s.waiting;
    sum.steps_in_flight += s.steps_in_flight;
    sum.steps += s.steps;
    sum.admitted += s.admitted;
    sum.preemptions += s.preemptions;
    sum.finished += s.finished;
    sum.cancelled += s.cancelled;
    sum.rejected += s.rejected;
    sum.prompt_tokens += s.prompt_tokens;
    sum.prefix_hit_tokens += s.prefix_hit_tokens;
    if (sum.spec_proposer.empty()) sum.spec_proposer = s.spec_proposer;
    sum.spec_proposed += s.spec_proposed;
    sum.spec_accepted += s.spec_accepted;
    sum.images_encoded += s.images_encoded;
    sum.image_cache_hits += s.image_cache_hits;
  }
  if (!any) throw Error(Errc::internal, "the model is not loaded yet");
  sum.prefix_hit_rate =
      sum.prompt_tokens == 0 ? 0.0 : static_cast<double>(sum.prefix_hit_tokens) / static_cast<double>(sum.prompt_tokens);
  return sum;
}

std::vector<ActorLoad> ReplicaRouter::actor_loads() const {
  std::vector<ActorLoad> out;
  if (!started()) return out;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    for (ActorLoad a : replicas_[i]->actor_loads()) {
      a.actor = replica_prefix(i) + a.actor;
      out.push_back(std::move(a));
    }
  }
  return out;
}

std::map<std::string, uint64_t> ReplicaRouter::anomaly_counts() const {
  std::map<std::string, uint64_t> out;
  if (!started()) return out;
  for (const auto& r : replicas_) {
    for (const auto& [metric, n] : r->anomaly_counts()) out[metric] += n;
  }
  return out;
}

std::vector<ActorSummary> ReplicaRouter::actor_summary() const {
  std::vector<ActorSummary> out;
  if (!started()) return out;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    for (ActorSummary a : replicas_[i]->actor_summary()) {
      a.actor = replica_prefix(i) + a.actor;
      out.push_back(std::move(a));
    }
  }
  return out;
}

std::vector<ReplicaFacts> ReplicaRouter::replicas() const {
  const std::vector<bool> up = started() ? serving() : std::vector<bool>(n_replicas_, false);
  std::lock_guard lock(mutex_);
  std::vector<ReplicaFacts> out;
  for (size_t i = 0; i < n_replicas_; ++i) {
    out.push_back({.index = static_cast<int32_t>(i),
                   .up = up[i],
                   .in_flight = counters_[i].in_flight,
                   .routed_affinity = counters_[i].routed_affinity,
                   .routed_least_loaded = counters_[i].routed_least_loaded});
  }
  return out;
}

}  // namespace troupe::net
