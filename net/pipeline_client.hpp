// The EngineClient over the real actor pipeline, loaded in the background: the
// server answers /health and /ready (503, with progress) at once and flips
// ready only when the model is loaded and the actors run.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "net/engine_client.hpp"

namespace troupe::net {

struct PipelineClientOptions {
  PipelineConfig pipeline;  // model_path: a GGUF file or a Hugging Face directory
  std::string model_id;     // the name clients use; empty: the file's or folder's name
  // Called from the loading thread at each step (and on failure).
  std::function<void(const LoadState&)> on_progress;
};

class PipelineClient : public EngineClient {
 public:
  explicit PipelineClient(PipelineClientOptions options);  // starts loading
  ~PipelineClient() override;                               // waits for the loader, stops the pipeline

  LoadState load_state() const override;
  ServedModel served_model() const override;
  MemoryPools memory_pools() const override;
  RequestId submit(EngineRequest request, RequestCallbacks callbacks) override;
  void tokenize(EngineRequest request, bool detokenize, std::function<void(TokenizeAnswer)> done) override;
  void cancel(RequestId id) override;
  PipelineStats stats() const override;
  std::vector<ActorLoad> actor_loads() const override;
  std::map<std::string, uint64_t> anomaly_counts() const override;
  std::vector<ActorSummary> actor_summary() const override;

  // Blocks until loaded or failed; returns whether it loaded.
  bool wait_loaded();

 private:
  void load();
  void set_state(LoadState s);

  PipelineClientOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  LoadState state_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> ready_{false};
  std::unique_ptr<Pipeline> pipeline_;  // set before ready_
  ServedModel info_;
  MemoryPools pools_;
  std::thread loader_;
};

// The model id for a path: "stories260K" for .../stories260K.gguf, the
// folder's name for a Hugging Face directory.
std::string model_id_from_path(const std::string& path);

}  // namespace troupe::net
