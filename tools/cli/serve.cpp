// `troupe serve`: loads a model into the actor pipeline and serves it over
// HTTP (OpenAI-compatible), WebSocket and a chat page at /. Settings come
// from defaults, then a config file (--config), then flags.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "net/pipeline_client.hpp"
#include "net/replica_router.hpp"
#include "net/routes.hpp"
#include "net/server.hpp"
#include "net/server_config.hpp"
#include "tools/cli/classifier_options.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/cpu_options.hpp"
#include "tools/cli/default_model.hpp"
#include "tools/cli/lora_option.hpp"
#include "tools/cli/quantize_option.hpp"
#include "vision/vision_model.hpp"

namespace troupe::cli {
namespace {

struct ServeArgs {
  CpuArgs cpu;
  std::string model;
  std::string quantize;
  LoraArgs lora;
  ClassifierArgs classifier;
  std::string config;
  std::string host;
  int port = -1;
  std::string api_key;
  std::string api_key_file;
  std::string model_name;
  std::string chat_template;
  std::string tool_call_parser;
  std::string reasoning_format;
  bool embedding = false;
  bool no_vision = false;
  std::string vision_device;
  std::string mmproj;
  std::string pooling;
  int64_t max_body = -1;
  int max_queue = -1;
  int max_running = -1;
  int max_tokens = -1;
  int64_t ws_max_message = -1;
  int64_t send_queue = -1;
  int io_threads = -1;
  int write_timeout = -1;
  int idle_timeout = -1;
  int header_timeout = -1;
  int max_connections = -1;
  int ws_ping_timeout = -1;
  int kv_blocks = -1;
  std::string kv_type;    // empty: the config's
  std::string kv_memory;  // empty: the config's
  int ctx = -1;
  int threads = -1;
  std::string device;
  int64_t gpu_layers = -1;
  double shutdown_grace = 30.0;
  std::string speculative;  // empty: the config's
  int draft_tokens = -1;
  std::string draft_model;
  int64_t draft_layers = -1;
};

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, std::string(what) + ": cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Defaults < config file < flags.
net::ServeConfig resolve(const ServeArgs& a) {
  net::ServeConfig c = a.config.empty() ? net::ServeConfig{} : net::load_serve_config(a.config);
  net::ServerSettings& s = c.server;
  if (!a.model.empty()) c.pipeline.model_path = a.model;
  if (c.pipeline.model_path.empty()) c.pipeline.model_path = default_model_path();
  if (!a.quantize.empty()) c.pipeline.load.quantize = quantize_scheme(a.quantize);
  if (auto lora = a.lora.specs(); !lora.empty()) c.pipeline.load.lora = std::move(lora);
  apply_classifier_options(a.classifier, c.pipeline.load);
  if (!a.host.empty()) s.listen.host = a.host;
  if (a.port >= 0) s.listen.port = static_cast<uint16_t>(a.port);
  // The key from a flag, a file, or the environment: the last two keep it
  // out of the process list.
  if (!a.api_key.empty()) {
    s.core.api_key = a.api_key;
  } else if (!a.api_key_file.empty()) {
    std::string key = read_file(a.api_key_file, "--api-key-file");
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r' || key.back() == ' ')) key.pop_back();
    if (key.empty()) throw Error(Errc::invalid_argument, "--api-key-file: " + a.api_key_file + " is empty");
    s.core.api_key = key;
  } else if (const char* env = std::getenv("TROUPE_API_KEY"); env != nullptr && *env != '\0') {
    s.core.api_key = env;
  }
  if (!a.model_name.empty()) s.model_name = a.model_name;
  if (!a.chat_template.empty()) s.chat_template_file = a.chat_template;
  if (a.max_body >= 0) {
    s.core.limits.max_body_bytes = static_cast<size_t>(a.max_body);
  } else if (a.config.empty() && !a.no_vision &&
             (!a.mmproj.empty() || vision::VisionModel::declared(c.pipeline.model_path))) {
    // Images come base64 in the body: a phone's photo is a few MB (OpenAI
    // takes up to 20 MB an image). A config file's limit is its own.
    s.core.limits.max_body_bytes = std::max<size_t>(s.core.limits.max_body_bytes, size_t{32} << 20);
    if (a.ws_max_message < 0) {
      s.core.limits.ws_max_message_bytes = std::max<size_t>(s.core.limits.ws_max_message_bytes, size_t{32} << 20);
    }
  }
  if (a.max_queue >= 0) s.core.admission.max_queue = a.max_queue;
  if (a.max_tokens >= 0) s.core.limits.request.max_tokens = a.max_tokens;
  if (a.ws_max_message >= 0) s.core.limits.ws_max_message_bytes = static_cast<size_t>(a.ws_max_message);
  if (a.send_queue >= 0) s.core.limits.send_queue_bytes = static_cast<size_t>(a.send_queue);
  if (a.io_threads >= 0) s.listen.io_threads = a.io_threads;
  if (a.write_timeout >= 0) s.listen.write_timeout_s = a.write_timeout;
  if (a.idle_timeout >= 0) s.listen.idle_timeout_s = a.idle_timeout;
  if (a.header_timeout >= 0) s.listen.header_timeout_s = a.header_timeout;
  if (a.max_connections >= 0) s.listen.max_connections = a.max_connections;
  if (a.ws_ping_timeout >= 0) s.listen.ws_ping_timeout_s = a.ws_ping_timeout;
  // The engine renders chat (its tokenizer actors): the template goes to
  // every chain.
  if (!s.chat_template_file.empty()) {
    c.pipeline.chat_template = read_file(s.chat_template_file, "--chat-template");
  }
  if (!a.tool_call_parser.empty()) c.pipeline.tool_call_parser = a.tool_call_parser;
  if (!a.reasoning_format.empty()) c.pipeline.reasoning_format = a.reasoning_format;
  if (a.embedding) c.pipeline.embedding = true;
  if (a.no_vision) c.pipeline.vision = false;
  if (!a.vision_device.empty()) c.pipeline.vision_device = a.vision_device;
  if (!a.mmproj.empty()) c.pipeline.mmproj = a.mmproj;
  if (!a.pooling.empty()) c.pipeline.pooling = a.pooling;
  // The topology flags apply to each replica as to a single chain.
  std::vector<PipelineConfig*> chains{&c.pipeline};
  for (PipelineConfig& r : c.replicas) {
    r.model_path = c.pipeline.model_path;
    r.load = c.pipeline.load;
    r.chat_template = c.pipeline.chat_template;
    r.tool_call_parser = c.pipeline.tool_call_parser;
    r.reasoning_format = c.pipeline.reasoning_format;
    r.embedding = c.pipeline.embedding;
    r.pooling = c.pipeline.pooling;
    r.mmproj = c.pipeline.mmproj;
    chains.push_back(&r);
  }
  // The remote stages' shared secret may come from the environment, out of
  // sight of the process list.
  const char* stage_secret = std::getenv("TROUPE_STAGE_SECRET");
  s.core.admission.max_running = 0;
  for (PipelineConfig* p : chains) {
    if (p->remote.secret.empty() && stage_secret != nullptr) p->remote.secret = stage_secret;
    if (a.max_running >= 0) p->scheduler.max_batch_size = a.max_running;
    if (a.kv_blocks >= 0 && !a.kv_memory.empty()) {
      throw Error(Errc::invalid_argument, "--kv-blocks and --kv-memory both size the KV pool: give one of them");
    }
    if (a.kv_blocks >= 0) {
      p->n_kv_blocks = a.kv_blocks;
      p->kv_memory_bytes = 0;
    }
    if (!a.kv_memory.empty()) p->kv_memory_bytes = parse_byte_size(a.kv_memory);
    if (!a.kv_type.empty()) p->kv_type = parse_kv_type(a.kv_type);
    if (a.ctx >= 0) p->scheduler.context_length = a.ctx;
    if (a.speculative == "off") p->scheduler.spec_max_draft = 0;
    if (!a.speculative.empty() && a.speculative != "off" && p->scheduler.spec_max_draft == 0) {
      p->scheduler.spec_max_draft = 4;
    }
    if (a.draft_tokens >= 0) p->scheduler.spec_max_draft = a.speculative == "off" ? 0 : a.draft_tokens;
    if (a.speculative == "ngram") {
      p->draft_model_path.clear();
      p->draft_layers = 0;
    }
    if (!a.draft_model.empty()) p->draft_model_path = a.draft_model;
    if (a.draft_layers >= 0) p->draft_layers = a.draft_layers;
    if (a.speculative == "draft" && p->draft_model_path.empty()) {
      throw Error(Errc::invalid_argument, "--speculative draft needs --draft MODEL (a model with the same vocabulary)");
    }
    if (a.speculative == "self" && p->draft_layers <= 0) {
      throw Error(Errc::invalid_argument, "--speculative self needs --draft-layers L (the first L layers draft)");
    }
    if (!a.device.empty()) p->device = a.device;
    if (a.gpu_layers >= 0) p->gpu_layers = a.gpu_layers;
    if (a.threads >= 0) {
      if (p->stages.empty()) p->stages.push_back({.first_layer = 0, .last_layer = -1});
      for (StageSpec& st : p->stages) st.threads = a.threads;
    }
    // The server admits what the schedulers run at once plus its own
    // queue; each waiting queue must hold at least that queue (prefix
    // affinity may send all of it to one replica).
    if (p != &c.pipeline || c.replicas.empty()) s.core.admission.max_running += p->scheduler.max_batch_size;
    p->scheduler.max_waiting = std::max(p->scheduler.max_waiting, s.core.admission.max_queue + 1);
  }
  return c;
}

// Chains whose start can be refused for reasons outside this process: a
// GPU stage (no GPU, too little memory) or a remote stage (a worker that
// refuses the handshake or cannot be reached).
bool must_start_before_listening(const PipelineConfig& p) {
  if (p.gpu_layers > 0 || (!p.device.empty() && p.device != "cpu")) return true;
  return std::any_of(p.stages.begin(), p.stages.end(),
                     [](const StageSpec& s) { return s.device != "cpu" || !s.remote.empty(); });
}

void run_serve(const ServeArgs& a) {
  apply_cpu_options(a.cpu);
  const net::ServeConfig cfg = resolve(a);
  const std::string model_path = cfg.pipeline.model_path;
  std::fprintf(stderr, "troupe serve: loading %s (CPU: %s%s%s)\n", model_path.c_str(), cpu_math_summary().c_str(),
               quantize_note(cfg.pipeline.load.quantize).c_str(), lora_note(cfg.pipeline.load.lora).c_str());
  const auto on_progress = [](const net::LoadState& s) {
    if (s.failed) return;
    std::fprintf(stderr, "troupe serve: %3.0f%% %s\n", 100.0 * s.progress, s.stage.c_str());
  };
  // One chain, or data-parallel replicas of it behind this one edge.
  std::unique_ptr<net::EngineClient> backend;
  std::function<bool()> wait_loaded;
  if (cfg.replicas.empty()) {
    auto b = std::make_unique<net::PipelineClient>(net::PipelineClientOptions{
        .pipeline = cfg.pipeline, .model_id = cfg.server.model_name, .on_progress = on_progress});
    wait_loaded = [p = b.get()] { return p->wait_loaded(); };
    backend = std::move(b);
  } else {
    std::fprintf(stderr, "troupe serve: %zu replicas\n", cfg.replicas.size());
    auto b = std::make_unique<net::ReplicaRouter>(net::ReplicaRouterOptions{.replicas = cfg.replicas,
                                                                              .model_id = cfg.server.model_name,
                                                                              .on_progress = on_progress,
                                                                              .routing = cfg.server.replica_routing});
    wait_loaded = [p = b.get()] { return p->wait_loaded(); };
    backend = std::move(b);
  }
  // A chain with a GPU or remote stage is started in full before the
  // server listens: no GPU, too little device memory, or a worker that
  // refuses the handshake ends start-up with its one sentence instead of a
  // server that answers for a while and dies. With replicas, every one of
  // them must start.
  const bool check_first = must_start_before_listening(cfg.pipeline) ||
                           std::any_of(cfg.replicas.begin(), cfg.replicas.end(), must_start_before_listening);
  if (check_first && !wait_loaded()) {
    throw Error(Errc::unavailable, "cannot start: " + backend->load_state().stage);
  }
  net::ServerCore core(*backend, cfg.server.core);
  // KV pressure for admission: requests the scheduler holds back while
  // batch slots are free (AdmissionControl reads it at most every 100 ms).
  core.admission().set_engine_probe([b = backend.get()] {
    const PipelineStats s = b->stats();
    return net::EngineLoad{.running = s.running, .waiting = s.waiting};
  });
  auto server = net::Server::start(core, cfg.server.listen);
  const std::string url = "http://" + cfg.server.listen.host + ":" + std::to_string(server->port()) + "/";
  std::printf("troupe serve: listening on %s\n", url.c_str());
  std::fflush(stdout);

  bool announced = false;
  server->wait_for_signal([&] {
    const net::LoadState s = backend->load_state();
    if (s.ready && !announced) {
      announced = true;
      const net::ServedModel info = backend->served_model();
      const net::MemoryPools pools = backend->memory_pools();
      if (pools.kv_token_bytes > 0) {
        std::printf("troupe serve: KV cache %s, %lld bytes per token, %lld tokens in %s\n", pools.kv_type.c_str(),
                    static_cast<long long>(pools.kv_token_bytes),
                    static_cast<long long>(pools.kv_bytes / pools.kv_token_bytes), format_bytes(pools.kv_bytes).c_str());
      }
      if (const SchedulerConfig& sc = cfg.pipeline.scheduler; sc.spec_max_draft > 0) {
        const std::string how = cfg.pipeline.draft_layers > 0 ? "self (first " + std::to_string(cfg.pipeline.draft_layers) + " layers)"
                                : !cfg.pipeline.draft_model_path.empty() ? "draft model " + cfg.pipeline.draft_model_path
                                                                         : std::string("ngram (prompt lookup)");
        std::printf("troupe serve: speculative decoding: %s, up to %d proposals per step\n", how.c_str(),
                    sc.spec_max_draft);
      }
      if (info.engine.n_labels > 1) {
        std::printf("troupe serve: ready: classifier '%s' (%d labels), inputs up to %d tokens: POST %sv1/classify\n",
                    info.id.c_str(), info.engine.n_labels, info.engine.context_length, url.c_str());
      } else if (info.engine.n_labels > 0) {
        std::printf(
            "troupe serve: ready: cross-encoder '%s' (%d label%s), pairs up to %d tokens: POST %sv1/rerank, "
            "%sv1/score\n",
            info.id.c_str(), info.engine.n_labels, info.engine.n_labels == 1 ? "" : "s", info.engine.context_length,
            url.c_str(), url.c_str());
      } else if (info.engine.pooling != Pooling::none) {
        std::printf("troupe serve: ready: embedding model '%s' (%s pooling, %d dimensions%s), inputs up to %d "
                    "tokens: POST %sv1/embeddings\n",
                    info.id.c_str(), to_string(info.engine.pooling), info.engine.n_embd,
                    info.engine.normalize ? ", normalized" : "", info.engine.context_length, url.c_str());
      } else {
        std::printf("troupe serve: ready: model '%s', context %d tokens. Open %s in a browser to chat.\n",
                    info.id.c_str(), info.engine.context_length, url.c_str());
      }
      std::fflush(stdout);
    }
    return s.failed;
  });
  const net::LoadState end_state = backend->load_state();
  // Order matters: new requests are refused and the running ones get the
  // grace period, then those left end cleanly (a final event each),
  // connections close and the I/O threads stop; the pipeline then ends what
  // still runs (its callbacks find the I/O context still there); the server
  // object goes last.
  if (end_state.failed) {
    std::fprintf(stderr, "troupe serve: stopping\n");
    server->stop();
  } else {
    std::fprintf(stderr, "troupe serve: stopping: up to %.0f s for the requests in flight (a second signal exits now)\n",
                 a.shutdown_grace);
    server->shutdown(a.shutdown_grace);
  }
  backend.reset();
  server.reset();
  if (end_state.failed) throw Error(Errc::io, "loading " + model_path + " failed: " + end_state.stage);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over HTTP (OpenAI API), WebSocket and a chat page");
  add_cpu_options(cmd, &a->cpu);
  cmd->add_option("-m,--model", a->model,
                  "GGUF file or Hugging Face directory (default: the set-up's SmolLM2-135M-Instruct)");
  add_quantize_option(cmd, &a->quantize);
  add_lora_options(cmd, &a->lora);
  add_classifier_options(cmd, &a->classifier);
  cmd->add_option("-c,--config", a->config, "Topology and server settings (configs/*.json)");
  cmd->add_option("--host", a->host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", a->port, "Port (default 8080; 0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", a->api_key, "Require 'Authorization: Bearer KEY' on /v1/* (or TROUPE_API_KEY)");
  cmd->add_option("--api-key-file", a->api_key_file, "Read the API key from a file (not visible in the process list)");
  cmd->add_option("--model-name", a->model_name, "The model id clients send (default: the file's name)");
  cmd->add_option("--chat-template", a->chat_template,
                  "Jinja chat template file (default: the model's, else a plain built-in one)");
  cmd->add_option("--tool-call-parser", a->tool_call_parser,
                  "How the model writes tool calls: hermes, llama3_json, mistral or json (default: what its chat "
                  "template teaches)")
      ->check(CLI::IsMember({"hermes", "llama3_json", "mistral", "json"}));
  cmd->add_option("--reasoning-format", a->reasoning_format,
                  "A chat answer's <think> block: auto (apart, as reasoning_content, when the chat template "
                  "speaks of </think>), deepseek (always apart), none (left in the content)")
      ->check(CLI::IsMember({"auto", "deepseek", "none"}));
  cmd->add_flag("--embedding", a->embedding,
                "Serve embeddings (/v1/embeddings) instead of generating: the default for a model that declares a "
                "pooling (sentence-transformers files, GGUF pooling_type), and for an encoder (BERT)");
  cmd->add_flag("--no-vision", a->no_vision,
                "Serve a vision-language model's text model alone: its vision tower is not loaded and requests "
                "with images are refused");
  cmd->add_option("--vision-device", a->vision_device,
                  "Where a vision-language model's vision tower runs: cpu (default) or cuda[:N]");
  cmd->add_option("--mmproj", a->mmproj,
                  "llama.cpp's mmproj GGUF file of a GGUF model's vision tower and projector (LLaVA-1.5's mlp, "
                  "Gemma 3's), as llama-server --mmproj takes it");
  cmd->add_option("--pooling", a->pooling,
                  "An embedding's pooling: last (the final token's state), mean, or cls (an encoder's first token) "
                  "(default: what the model declares, else last; an encoder's cls)")
      ->check(CLI::IsMember({"last", "mean", "cls"}));
  cmd->add_option("--max-body", a->max_body,
                  "Largest request body in bytes (default 1 MiB, 32 MiB for a vision-language model; larger: 413)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-queue", a->max_queue, "Requests queued beyond those running (default 64; more: 429)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-running", a->max_running, "Requests running at once (the scheduler's batch, default 64)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-tokens", a->max_tokens, "Largest max_tokens a request may ask for (default 4096)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--ws-max-message", a->ws_max_message,
                  "Largest WebSocket message in bytes (default 64 KiB; larger: close 1009)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--send-queue", a->send_queue, "Bytes a client may fall behind before it is dropped (default 4 MiB)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--io-threads", a->io_threads, "Network threads (default 2)")->check(CLI::Range(1, 256));
  cmd->add_option("--write-timeout", a->write_timeout,
                  "Seconds a client may take no data before it is dropped (default 60)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--idle-timeout", a->idle_timeout,
                  "Seconds a kept-alive connection may wait for its next request (default 60)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--header-timeout", a->header_timeout,
                  "Seconds from a request's first byte to the end of its headers (default 10)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-connections", a->max_connections,
                  "Open connections, HTTP and WebSocket (default 1024; idle ones make room, else 503)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--ws-ping-timeout", a->ws_ping_timeout,
                  "Seconds a WebSocket may stay silent, pinged at half (default 60)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--kv-blocks", a->kv_blocks, "KV pages of 16 tokens (default 512)")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-type", a->kv_type, "KV cache element type: f32, f16, bf16 or q8_0 (default f32)");
  cmd->add_option("--kv-memory", a->kv_memory,
                  "KV pages sized by bytes over all stages, e.g. 2GiB (q8_0 holds ~3.7x the tokens of f32)");
  cmd->add_option("--speculative", a->speculative,
                  "Speculative decoding: ngram (prompt lookup), draft (--draft MODEL), self (the model's first "
                  "--draft-layers layers) or off (default); proposals are verified in the same step")
      ->check(CLI::IsMember({"ngram", "draft", "self", "off"}));
  cmd->add_option("--draft", a->draft_model, "Draft model for --speculative draft (same vocabulary as the model)");
  cmd->add_option("--draft-layers", a->draft_layers, "Layers that draft with --speculative self")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--draft-tokens", a->draft_tokens,
                  "Most proposed tokens per step and sequence with --speculative (default 4; adapts down)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--ctx", a->ctx, "Context length, capped at the model's (default 4096)")->check(CLI::PositiveNumber);
  cmd->add_option("-t,--threads", a->threads, "Kernel threads per stage (0: all hardware threads)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--device", a->device, "Where every stage runs: cpu, cuda or cuda:N (default: the config's, else cpu)");
  cmd->add_option("--gpu-layers,-g", a->gpu_layers,
                  "Put the last N layers (and the output head) on the GPU, the rest on the CPU")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--shutdown-grace", a->shutdown_grace,
                  "On SIGTERM/SIGINT, seconds running requests may take to finish before they are ended (default 30)")
      ->check(CLI::NonNegativeNumber);
  cmd->callback([a] { run_serve(*a); });
}

}  // namespace troupe::cli
