// The public C++ API of the actor pipeline: start a topology (tokenizers,
// scheduler, N executor stages, sampler, detokenizer) from a PipelineConfig,
// submit requests with callbacks, cancel them, read counters. Free of CAF
// headers; actors/pipeline_extensions.hpp adds custom sampler and observer
// actors for those who write CAF actors themselves.
#pragma once

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/request_types.hpp"
#include "actors/stage_status.hpp"
#include "memory/kv_type.hpp"
#include "model/model.hpp"
#include "telemetry/actor_summary.hpp"
#include "telemetry/anomaly.hpp"
#include "telemetry/chrome_trace.hpp"
#include "tokenizer/tokenizer.hpp"

namespace caf {
class actor_system;
}

namespace troupe {

// A contiguous range of layers on its own device: the CPU with its own
// kernel threads, or a GPU ("cuda", "cuda:N"). Each stage allocates its KV
// pages and step arena on its device.
struct StageSpec {
  int64_t first_layer = 0;
  int64_t last_layer = -1;    // exclusive; -1: the model's last layer
  int threads = 1;            // CPU kernel threads of this stage (0: all hardware threads)
  std::string device = "cpu"; // "cpu", "cuda", "cuda:N"
  // "host:port" of a `troupe stage` worker that holds these layers: the
  // stage runs in that process (threads and device are the worker's).
  std::string remote;
};

// How the head talks to remote stages (docs/distributed.md).
struct RemoteSettings {
  std::string secret;                // shared secret checked by the workers; empty: none
  int64_t step_timeout_ms = 30000;   // a step unanswered this long: the worker is lost
  int64_t hello_timeout_ms = 10000;  // the handshake
  // TLS between hosts (CAF's OpenSSL module): this side's certificate and
  // key, and the CA that signed the peers'. All empty: plain TCP.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
  uint32_t wire_version = 0;         // 0: this build's protocol (tests pose as another)
};

// Per-actor timelines (telemetry/trace_ring.hpp): every message an actor
// handles becomes a span in that actor's bounded ring.
struct TraceOptions {
  bool enabled = false;
  size_t capacity = 1 << 16;  // spans kept per actor (about 120 bytes each, ids included)
};

struct PipelineConfig {
  std::string model_path;               // loaded when `model` is null
  ModelLoadOptions load;                // how model_path loads (`--quantize`)
  std::shared_ptr<const Model> model;   // an already loaded model
  // In layer order, covering every layer once; empty: one stage with all
  // layers and `threads` 0.
  std::vector<StageSpec> stages;
  // `--device`: when set, every stage runs there (an empty `stages` is one
  // stage with every layer).
  std::string device;
  // `--gpu-layers N` (llama.cpp's -ngl): when >= 0, replaces `stages` by the
  // last N layers (and the output head) on `device` (default cuda:0) and the
  // layers before them on the CPU.
  int64_t gpu_layers = -1;
  RemoteSettings remote;
  SchedulerConfig scheduler;            // context_length is capped at the model's trained context
  int32_t n_kv_blocks = 512;            // KV pages shared by all requests (each stage has them for its layers)
  int32_t kv_block_size = 16;           // tokens per page
  KvType kv_type = KvType::f32;         // element type of the KV pages (`--kv-type`)
  // `--kv-memory`: when > 0, n_kv_blocks is what this many bytes of KV pages
  // hold over all stages in kv_type (model/stage_plan.hpp, kv_blocks_for_budget).
  int64_t kv_memory_bytes = 0;
  bool prefix_caching = true;
  // A vision-language model's images (LLaVA: vision/vision_model.hpp): its
  // vision tower is loaded from model_path's directory and runs beside the
  // stages (`--no-vision`: false, the text model alone, images refused).
  bool vision = true;
  // Where the tower runs (`--vision-device`): "cpu" (with the first
  // stage's threads) or "cuda[:N]" (written for the CUDA backend and checked
  // against the CPU by test_cuda, not yet run on a GPU).
  std::string vision_device = "cpu";
  // A GGUF text model's image side: llama.cpp's mmproj file (`--mmproj`,
  // "mmproj" in a config file; vision/vision_model.hpp, load_mmproj). Empty:
  // model_path's own tower, if its directory has one.
  std::string mmproj;
  // Speculative decoding's proposer when scheduler.spec_max_draft > 0: a
  // draft model with the target's vocabulary (`--draft MODEL`: draft_model,
  // else loaded from draft_model_path), or with draft_layers > 0 the
  // target's own first draft_layers layers and output head
  // (self-speculation, `--draft-layers L`). Neither: prompt lookup. The
  // draft runs on the CPU with draft_threads kernel threads (0: the first
  // stage's), its KV in pages of its own.
  std::string draft_model_path;
  std::shared_ptr<const Model> draft_model;
  int64_t draft_layers = 0;
  int32_t draft_threads = 0;
  int32_t micro_batches = 0;            // steps in flight at once; 0: one per stage
  int32_t tokenizer_pool = 1;           // tokenizer actors, round-robin
  // Jinja source of a chat template that replaces the model's (`troupe serve
  // --chat-template`); empty: the model's own, else a plain built-in one.
  std::string chat_template;
  // How the model writes tool calls (grammar/tool_calls.hpp: hermes,
  // llama3_json, mistral, json; `troupe serve --tool-call-parser`); empty:
  // what the chat template teaches it.
  std::string tool_call_parser;
  // Whether a chat answer's <think>...</think> block is returned apart, as
  // reasoning_content (llama.cpp's --reasoning-format): "auto" (empty; when
  // the chat template speaks of </think>), "deepseek" (always), "none".
  std::string reasoning_format;
  // An embedding pipeline (`--embedding`): it takes embedding requests
  // (EmbedParams, /v1/embeddings) and no others, its last stage returning
  // final hidden rows that the sampler pools. Unset: on when the model
  // declares a pooling (sentence-transformers files, GGUF pooling_type) or
  // is an encoder (BERT: it cannot generate, and refuses off).
  std::optional<bool> embedding;
  // `--pooling last|mean|cls`: replaces the model's declared pooling; empty:
  // the model's (when it declares none: last for a causal model, whose last
  // token has seen the whole input; cls for an encoder). cls needs an encoder.
  std::string pooling;
  int32_t actor_threads = 2;            // CAF's scheduler threads (the light actors)
  TraceOptions trace;
  // TTFT and step-time excursions: counted (Pipeline::anomaly_counts), kept
  // (recent_anomalies) and passed to on_anomaly, which runs on an actor
  // thread (keep it short: a log line).
  AnomalyOptions anomaly;
  std::function<void(const AnomalyEvent&)> on_anomaly;
};

struct RequestCallbacks {
  std::function<void(const TokenEvent&)> on_token;
  std::function<void(const FinalEvent&)> on_final;
  // First, once the prompt passed every rule (a refused request gets only
  // on_final); optional.
  std::function<void(const PromptEvent&)> on_prompt;
};

// What generate() collects.
struct Completion {
  std::vector<TokenEvent> tokens;
  FinalEvent final;
  std::string text;  // every token text and the final tail
};

// How model_path loads: `load`, and when it names no context, the one the
// scheduler will run (LongRoPE models choose their RoPE factors by it).
// Whoever loads the model for a pipeline (the server, a router) uses it.
ModelLoadOptions pipeline_load_options(const PipelineConfig& config);

struct PipelineExtensions;  // actors/pipeline_extensions.hpp

class Pipeline {
 public:
  // Loads the model if needed, validates the config (Error naming the field
  // at fault) and spawns the actors.
  static std::unique_ptr<Pipeline> start(PipelineConfig config);
  static std::unique_ptr<Pipeline> start(PipelineConfig config, const PipelineExtensions& extensions);

  // Ends every request still running (each gets a FinalEvent "cancelled"),
  // stops the actors and waits for them, callbacks included.
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Starts a request and returns at once. Every request enters through a
  // tokenizer actor, which renders, encodes and checks it against the
  // model (actors/request_rules.hpp). The callbacks run later on an actor
  // thread (one request's callbacks never run concurrently with each
  // other): on_prompt, a stream of on_token, then exactly one on_final. Keep
  // them short and non-blocking; an exception thrown by one cancels the
  // request. A refused request (a rule broken, a prompt that can never fit)
  // gets only a FinalEvent with reason error, its Errc and the field at
  // fault, and touches no other request. Thread-safe.
  RequestId submit(EngineRequest request, RequestCallbacks callbacks);
  RequestId submit(TextPrompt prompt, GenerateParams params, RequestCallbacks callbacks);
  RequestId submit(std::vector<int32_t> prompt, GenerateParams params, RequestCallbacks callbacks);

  // submit() collecting everything into a future.
  std::future<Completion> generate(EngineRequest request);
  std::future<Completion> generate(TextPrompt prompt, GenerateParams params);
  std::future<Completion> generate(std::vector<int32_t> prompt, GenerateParams params);

  // /tokenize (`detokenize` false: the ids of request's prompt, text or chat,
  // as a request would have them) and /detokenize (true: the text of
  // request.tokens), through a tokenizer actor. `done` runs once, on an
  // actor thread. Thread-safe.
  void tokenize(EngineRequest request, bool detokenize, std::function<void(TokenizeAnswer)> done);

  // Ends the request at once: its KV blocks are free when the scheduler
  // takes the message, its FinalEvent says cancelled. Unknown or finished
  // ids are ignored. Thread-safe.
  void cancel(RequestId id);

  // Counters and KV occupancy, asked of the scheduler (a round trip that
  // blocks the caller: do not call from a callback). Throw Error(internal)
  // when the scheduler does not answer within a few seconds.
  PipelineStats stats() const;
  KvSnapshot kv_snapshot() const;
  // Mailbox depth, messages handled and busy time of the scheduler, the
  // detokenizer and each executor stage. Lock-free reads; callable from
  // anywhere, callbacks included.
  std::vector<ActorLoad> actor_loads() const;

  // Tracing (PipelineConfig::trace): the spans of every actor (tokenizers,
  // scheduler, executor stages, sampler, detokenizer; one track each), as
  // a Chrome trace file, and the per-actor summary that names the busiest
  // actor. Empty when tracing is off. Callable while requests run.
  bool tracing() const;
  std::vector<TrackData> trace() const;
  void write_trace(const std::string& path) const;
  TraceSummary trace_summary() const;

  std::map<std::string, uint64_t> anomaly_counts() const;  // "ttft", "step_time"
  std::vector<AnomalyEvent> recent_anomalies() const;

  // Each executor stage: its layers, device, and whether it is up (a GPU
  // that reported an error is not). Lock-free enough for /ready.
  std::vector<StageHealth> stage_health() const;
  bool stages_up() const;
  // Empty while every pipeline actor runs. Once one stopped (an exception in
  // a handler, a kill), the reason: each open request ended with an
  // internal error, and new ones are refused at once. Lock-free enough for
  // /ready.
  std::string failure() const;

  // The model's facts every front end needs (context length, vocab, special
  // tokens, which chat template renders, KV bytes per token).
  const ModelInfo& model_info() const;

  const Model& model() const;
  const Tokenizer& tokenizer() const;
  int32_t n_stages() const;
  // The actor system, for spawning one's own actors next to the pipeline's.
  // The pipeline's actors are in its registry by name (caf::atom("scheduler"),
  // "detokenize", "sampler", "tokenizer", "executor0", ...).
  caf::actor_system& system();

  struct Impl;

 private:
  explicit Pipeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe
