// The engine as the network edge holds it (named apart from kernels/'
// Backend, which is a device): readiness, the model's facts,
// submit/cancel, tokenize, counters. The edge never tokenizes: prompts go in
// as text, chat or ids, and the engine's tokenizer actor renders, encodes
// and checks them. An interface so that the routes and the WebSocket logic
// are tested with a scripted fake as well as with the real actor pipeline
// (net/pipeline_client.hpp) or replicas of it (net/replica_router.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"
#include "model/lora.hpp"

namespace troupe::net {

// The model as clients see it.
struct ServedModel {
  std::string id;       // the name clients pass as "model"
  int64_t created = 0;  // unix time the server loaded it
  ModelInfo engine;     // the engine's facts (context length, vocab, KV bytes per token)
  std::string architecture;  // ModelConfig::arch ("llama", "qwen3", "bert"); Ollama's model family
  std::string digest;        // model_identity(): equal for two loads of the same file
  std::string format;        // the file's kind: "gguf", "safetensors" (a Hugging Face folder), "llama2.c"
  std::vector<LoraAdapterSpec> lora;  // the LoRA adapters every request runs with, as given at start
};

// Sizes of the engine's memory pools, for /metrics.
struct MemoryPools {
  int64_t weight_bytes = 0;
  int64_t kv_bytes = 0;       // all KV pages of all stages
  int32_t kv_block_size = 0;  // tokens per KV page
  int64_t kv_token_bytes = 0; // KV bytes per cached token, every stage (depends on the KV type)
  std::string kv_type;        // "f32", "f16", "bf16", "q8_0"
};

// Progress of loading, for /ready and the console.
struct LoadState {
  bool ready = false;   // loaded and every stage up: requests are served
  bool loaded = false;  // the model is loaded and the pipeline runs (a stage may be down)
  bool failed = false;
  double progress = 0;  // 0..1
  std::string stage;    // what is happening ("reading", "starting the pipeline", the error, the stage that is down)
  std::vector<StageHealth> stages;  // once loaded: each executor stage, up or not
};

// One data-parallel replica as its router sees it (net/replica_router.hpp),
// for /metrics.
struct ReplicaFacts {
  int32_t index = 0;
  bool up = false;                   // serving (loaded, every stage up)
  int32_t in_flight = 0;             // requests routed to it, not yet ended
  uint64_t routed_affinity = 0;      // sent there because it holds their prompt's prefix
  uint64_t routed_least_loaded = 0;  // sent there as the least loaded
};

class EngineClient {
 public:
  virtual ~EngineClient() = default;

  virtual LoadState load_state() const = 0;
  bool ready() const { return load_state().ready; }

  // Valid only once ready.
  virtual ServedModel served_model() const = 0;
  virtual MemoryPools memory_pools() const = 0;

  // As Pipeline::submit / tokenize / cancel / stats (thread-safe; stats
  // blocks). A request the engine refuses ends with its FinalEvent only.
  virtual RequestId submit(EngineRequest request, RequestCallbacks callbacks) = 0;
  virtual void tokenize(EngineRequest request, bool detokenize, std::function<void(TokenizeAnswer)> done) = 0;
  virtual void cancel(RequestId id) = 0;
  virtual PipelineStats stats() const = 0;
  // Busy time and mailbox depth per actor (empty when not known).
  virtual std::vector<ActorLoad> actor_loads() const { return {}; }
  // Anomaly flags raised so far, by metric (PipelineConfig::anomaly).
  virtual std::map<std::string, uint64_t> anomaly_counts() const { return {}; }
  // Busy fraction and mailbox wait per actor over the trace ring's window;
  // empty unless the pipeline traces (PipelineConfig::trace).
  virtual std::vector<ActorSummary> actor_summary() const { return {}; }
  // Each data-parallel replica; empty for a single chain.
  virtual std::vector<ReplicaFacts> replicas() const { return {}; }
};

}  // namespace troupe::net
