// `troupe stage`: a worker process that holds a range of a model's layers
// (and their KV pages) on its device and serves them to a head process over
// CAF's middleman, so one model's chain spans processes and hosts.
#include <CLI/CLI.hpp>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#ifdef TROUPE_HAVE_CAF_OPENSSL
#include <caf/openssl/manager.hpp>
#include <caf/openssl/publish.hpp>
#endif

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "actors/messages.hpp"
#include "actors/pipeline.hpp"
#include "actors/pipeline_model_info.hpp"
#include "actors/remote_stage.hpp"
#include "actors/stage_worker.hpp"
#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "tools/cli/classifier_options.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/cpu_options.hpp"
#include "tools/cli/default_model.hpp"
#include "tools/cli/lora_option.hpp"
#include "tools/cli/quantize_option.hpp"

namespace troupe::cli {
namespace {

struct StageArgs {
  CpuArgs cpu;
  std::string model;
  std::string quantize;
  LoraArgs lora;
  ClassifierArgs classifier;
  std::string layers;
  std::string device = "cpu";
  int threads = 0;
  std::string listen = "127.0.0.1:7001";
  int32_t kv_blocks = PipelineConfig{}.n_kv_blocks;
  int32_t kv_block_size = PipelineConfig{}.kv_block_size;
  std::string kv_type = "f32";
  int64_t max_tokens = SchedulerConfig{}.max_tokens_per_step;
  int64_t max_seqs = SchedulerConfig{}.max_batch_size;
  int64_t state_slots = 0;
  bool embedding = false;
  int32_t ctx = SchedulerConfig{}.context_length;
  std::string secret;
  std::string tls_cert, tls_key, tls_ca;
  uint32_t wire_version = kStageWireVersion;
};

// "A:B" (B empty or -1: to the last layer).
std::pair<int64_t, int64_t> parse_layers(const std::string& s) {
  const size_t colon = s.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no colon");
    size_t used = 0;
    const int64_t a = std::stoll(s.substr(0, colon), &used);
    if (used != colon) throw std::invalid_argument("trailing text");
    const std::string rest = s.substr(colon + 1);
    int64_t b = -1;
    if (!rest.empty()) {
      b = std::stoll(rest, &used);
      if (used != rest.size()) throw std::invalid_argument("trailing text");
    }
    return {a, b};
  } catch (const std::exception&) {
    throw Error(Errc::invalid_argument, "--layers wants FIRST:LAST (LAST exclusive, empty or -1: to the end), got '" +
                                            s + "'");
  }
}

bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

void run_stage(const StageArgs& a) {
  apply_cpu_options(a.cpu);
  const auto [first, last] = parse_layers(a.layers);
  const auto [host, port] = parse_host_port(a.listen, /*allow_any_port=*/true);
  std::string secret = a.secret;
  if (secret.empty()) {
    if (const char* env = std::getenv("TROUPE_STAGE_SECRET")) secret = env;
  }
  const bool tls = !a.tls_cert.empty() || !a.tls_key.empty() || !a.tls_ca.empty();
  if (tls && (a.tls_cert.empty() || a.tls_key.empty() || a.tls_ca.empty())) {
    throw Error(Errc::invalid_argument, "--tls-cert, --tls-key and --tls-ca go together");
  }
  if (!is_loopback(host) && secret.empty()) {
    std::fprintf(stderr,
                 "troupe stage: warning: listening on %s without a secret: anyone who reaches this port can drive "
                 "the stage (set --secret or TROUPE_STAGE_SECRET)\n",
                 host.c_str());
  }
  if (!is_loopback(host) && !tls) {
    std::fprintf(stderr, "troupe stage: warning: steps cross the network unencrypted (see --tls-cert)\n");
  }

  // Signals are taken by sigwait below: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const std::string path = a.model.empty() ? default_model_path() : a.model;
  const std::optional<QuantScheme> quantize = quantize_scheme(a.quantize);
  ModelLoadOptions load{.quantize = quantize, .context_length = a.ctx, .lora = a.lora.specs()};
  std::fprintf(stderr, "troupe stage: loading %s (CPU: %s%s%s)\n", path.c_str(), cpu_math_summary().c_str(),
               quantize_note(quantize).c_str(), lora_note(load.lora).c_str());
  apply_classifier_options(a.classifier, load);  // the head's: a worker holding the last layer runs the head
  std::shared_ptr<const Model> model = Model::load(path, load);

  caf::actor_system_config cfg;
  cfg.add_message_types<caf::id_block::troupe>();
  cfg.load<caf::io::middleman>();
  cfg.set("scheduler.max-threads", size_t{2});
  cfg.set("scheduler.policy", caf::atom("sharing"));
  if (tls) {
#ifdef TROUPE_HAVE_CAF_OPENSSL
    cfg.openssl_certificate = a.tls_cert;
    cfg.openssl_key = a.tls_key;
    cfg.openssl_cafile = a.tls_ca;
    cfg.load<caf::openssl::manager>();
#else
    throw Error(Errc::unsupported, "--tls-* needs CAF's OpenSSL module, which this build lacks");
#endif
  }
  caf::actor_system system{cfg};
  StageFacts facts;
  stage_worker_actor worker = spawn_stage_worker(
      system,
      {.model = model,
       .first_layer = first,
       .last_layer = last,
       .device = a.device,
       .threads = a.threads,
       .kv_blocks = a.kv_blocks,
       .kv_block_size = a.kv_block_size,
       .kv_type = parse_kv_type(a.kv_type),
       .max_tokens = a.max_tokens,
       .max_seqs = a.max_seqs,
       .state_slots = a.state_slots,
       // As the head decides: asked for, or declared by the model.
       .embedding = a.embedding || embeds_by_default(model->config()),
       .secret = secret,
       .wire_version = a.wire_version,
       .log = [](const std::string& line) { std::fprintf(stderr, "troupe stage: %s\n", line.c_str()); }},
      &facts);
  caf::expected<uint16_t> bound{caf::error{}};
  if (tls) {
#ifdef TROUPE_HAVE_CAF_OPENSSL
    bound = caf::openssl::publish(worker, port, host.c_str(), true);
#endif
  } else {
    bound = system.middleman().publish(worker, port, host.c_str(), true);
  }
  if (!bound) {
    caf::anon_send_exit(worker, caf::exit_reason::user_shutdown);
    throw Error(Errc::io, "cannot listen on " + host + ":" + std::to_string(port) + ": " + system.render(bound.error()));
  }
  std::printf("troupe stage: layers [%lld, %lld) of %s (model id %s) on %s, listening on %s:%u%s\n",
              static_cast<long long>(facts.first_layer), static_cast<long long>(facts.last_layer),
              facts.model_name.c_str(), facts.model_id.c_str(), facts.device.c_str(), host.c_str(),
              static_cast<unsigned>(*bound), tls ? " (TLS)" : "");
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "troupe stage: signal %d, stopping\n", sig);
  (void)system.middleman().unpublish(worker, *bound);
  // Exit here, without the actor system's teardown: CAF 0.17 keeps every
  // actor a remote node has seen in its registry until the middleman stops,
  // which ~actor_system does only after it has waited for the worker's
  // detached thread to end, so a worker that served a head would wait for
  // itself forever. The worker owns nothing that needs an orderly close.
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(0);
}

}  // namespace

void add_stage_command(CLI::App& app) {
  auto a = std::make_shared<StageArgs>();
  CLI::App* cmd = app.add_subcommand("stage", "Serve a range of a model's layers to a head process (a remote stage)");
  add_cpu_options(cmd, &a->cpu);
  cmd->add_option("-m,--model", a->model, "GGUF file or Hugging Face directory: the same model as the head's");
  add_quantize_option(cmd, &a->quantize);  // must be the head's: the handshake compares the weights
  add_lora_options(cmd, &a->lora);         // so must these
  add_classifier_options(cmd, &a->classifier);
  cmd->add_option("--layers", a->layers, "FIRST:LAST, the layers this worker holds (LAST exclusive; empty: to the end)")
      ->required();
  cmd->add_option("--device", a->device, "cpu, cuda or cuda:N");
  cmd->add_flag("--embedding", a->embedding,
                "The last stage of an embedding pipeline (the head's --embedding; the default for a model that "
                "declares a pooling)");
  cmd->add_option("-t,--threads", a->threads, "CPU kernel threads (0: all hardware threads)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--listen", a->listen, "HOST:PORT to listen on (default 127.0.0.1:7001; port 0: any free port)");
  cmd->add_option("--kv-blocks", a->kv_blocks, "KV pages (must equal the head's; default 512)")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-type", a->kv_type, "KV cache element type: f32, f16, bf16 or q8_0 (must equal the head's)");
  cmd->add_option("--kv-block-size", a->kv_block_size, "Tokens per KV page (must equal the head's; default 16)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-tokens", a->max_tokens, "Most tokens in one step (at least the head's; default 2048)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-seqs", a->max_seqs, "Most sequences in one step (at least the head's; default 64)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--state-slots", a->state_slots,
                  "Recurrent-state slots of a model with linear-attention layers (Qwen3.5, Qwen3-Next): at least "
                  "the head's max batch size times its stages (default: 2 x --max-seqs)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--ctx", a->ctx,
                  "The head's context length (default 4096): LongRoPE models choose their RoPE factors by it, and "
                  "the handshake compares them")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--secret", a->secret, "Shared secret heads must present (or TROUPE_STAGE_SECRET)");
  cmd->add_option("--tls-cert", a->tls_cert, "TLS: this worker's certificate (PEM)");
  cmd->add_option("--tls-key", a->tls_key, "TLS: its private key (PEM)");
  cmd->add_option("--tls-ca", a->tls_ca, "TLS: the CA that signed the heads' certificates");
  // For tests of the protocol check: pose as a worker of another version.
  cmd->add_option("--wire-version", a->wire_version)->group("");
  cmd->callback([a] { run_stage(*a); });
}

}  // namespace troupe::cli
