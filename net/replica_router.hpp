// Data-parallel replicas behind one edge: an EngineClient that routes each
// request to one of N whole chains (each a PipelineClient, or any EngineClient
// in tests), least loaded first, with prefix affinity so that prompts
// sharing a prefix reach the replica that holds it in its prefix cache.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/engine_client.hpp"

namespace troupe::net {

struct ReplicaRouting {
  // The replica that holds a prompt's prefix takes it unless it runs more
  // than this many requests beyond the least loaded replica: a warm cache
  // saves a prefill, but not at any queueing cost.
  int32_t affinity_slack = 4;
  // Prompt prefixes (in tokens) keyed for affinity; the longest one a
  // prompt has and a replica is known for wins. Multiples of the KV block
  // size: the prefix cache keeps full blocks only. Shorter prompts go to
  // the least loaded replica.
  std::vector<int32_t> prefix_tokens = {32, 256};
  size_t affinity_entries = 4096;  // prefixes remembered, least recently routed forgotten first
};

struct ReplicaRouterOptions {
  // One whole chain each (stages, KV pool, scheduler). The first one's
  // model (`model`, else `model_path`) is loaded once and shared by all.
  std::vector<PipelineConfig> replicas;
  std::string model_id;  // the name clients use; empty: the file's name
  // Each replica's loading steps, its stage prefixed "replica <i>: ";
  // called from loading threads.
  std::function<void(const LoadState&)> on_progress;
  ReplicaRouting routing;
};

class ReplicaRouter : public EngineClient {
 public:
  // Over ready-made backends (chains built elsewhere, or fakes).
  explicit ReplicaRouter(std::vector<std::unique_ptr<EngineClient>> replicas, ReplicaRouting routing = {});
  // Loads the model in the background, then starts one PipelineClient per
  // config, all sharing it.
  explicit ReplicaRouter(ReplicaRouterOptions options);
  // Waits for the loader; each replica then ends what still runs.
  ~ReplicaRouter() override;
  ReplicaRouter(const ReplicaRouter&) = delete;
  ReplicaRouter& operator=(const ReplicaRouter&) = delete;

  // Ready while at least one replica is; `stages` lists every replica's
  // stages as "replica<i>/executor_k"; failed only when every replica failed.
  LoadState load_state() const override;
  // From the first serving replica (they share the model); the context
  // length is the smallest any serving replica accepts.
  ServedModel served_model() const override;
  MemoryPools memory_pools() const override;  // the shared weights once, every replica's KV
  // Routes to a serving replica and answers with the router's own id; the
  // callbacks' events carry that id too.
  RequestId submit(EngineRequest request, RequestCallbacks callbacks) override;
  void tokenize(EngineRequest request, bool detokenize, std::function<void(TokenizeAnswer)> done) override;
  void cancel(RequestId id) override;
  PipelineStats stats() const override;  // summed over the loaded replicas (the KV peak: sum of peaks)
  std::vector<ActorLoad> actor_loads() const override;  // names prefixed "replica<i>/"
  std::map<std::string, uint64_t> anomaly_counts() const override;
  std::vector<ActorSummary> actor_summary() const override;
  std::vector<ReplicaFacts> replicas() const override;

  // Blocks until every replica has loaded or failed; true when all loaded.
  bool wait_loaded();
  // Requests routed and not yet ended (their id map entries).
  size_t tracked_requests() const;

 private:
  enum class Reason : uint8_t { affinity, least_loaded };
  struct Route {
    size_t replica = 0;
    std::optional<RequestId> inner;  // the replica's id, once its submit returned
    bool cancel_pending = false;     // cancelled before that
  };
  struct Counters {
    int32_t in_flight = 0;
    uint64_t routed_affinity = 0;
    uint64_t routed_least_loaded = 0;
  };

  void load(ReplicaRouterOptions options);
  bool started() const { return started_.load(std::memory_order_acquire); }
  std::vector<bool> serving() const;
  std::vector<uint64_t> prefix_keys(const EngineRequest& request) const;  // longest prefix first
  // Under mutex_: the replica for a prompt, or nullopt when none serves.
  std::optional<std::pair<size_t, Reason>> choose(const std::vector<bool>& up, const std::vector<uint64_t>& keys);
  void remember(const std::vector<uint64_t>& keys, size_t replica);  // under mutex_
  void finish(RequestId id);  // a final event (or a failed submit): drop the route, release the load
  const EngineClient* first_loaded() const;

  ReplicaRouting routing_;
  size_t n_replicas_ = 0;

  mutable std::mutex mutex_;
  std::vector<Counters> counters_;
  std::unordered_map<RequestId, Route> routes_;
  RequestId next_id_ = 1;
  // Affinity: prefix key -> replica, most recently routed first.
  std::list<std::pair<uint64_t, size_t>> lru_;
  std::unordered_map<uint64_t, std::list<std::pair<uint64_t, size_t>>::iterator> affinity_;

  // Set once (before started_) and never changed after.
  std::vector<std::unique_ptr<EngineClient>> replicas_;
  std::atomic<bool> started_{false};
  std::atomic<bool> stop_{false};
  LoadState loader_state_;  // before started_: loading the shared model (under mutex_)
  std::thread loader_;
};

}  // namespace troupe::net
