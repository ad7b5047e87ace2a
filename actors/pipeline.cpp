// The pipeline builder: validates a PipelineConfig, builds the stages, spawns
// and wires the actors (spawned after the actors they send to, so handles go
// in at spawn; the scheduler's handle reaches the executors and detokenizer
// in connect messages), and takes them down again in order.
#include "actors/pipeline.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#ifdef TROUPE_HAVE_CAF_OPENSSL
#include <caf/openssl/manager.hpp>
#endif
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <unordered_map>

#include "actors/actor_meter.hpp"
#include "actors/callback_sink.hpp"
#include "actors/detokenizer_actor.hpp"
#include "actors/draft_setup.hpp"
#include "actors/engine_set.hpp"
#include "actors/executor_actor.hpp"
#include "actors/open_requests.hpp"
#include "actors/pipeline_extensions.hpp"
#include "actors/pipeline_model_info.hpp"
#include "actors/pipeline_remote.hpp"
#include "actors/pipeline_vision.hpp"
#include "actors/remote_stage.hpp"
#include "actors/sampler_actor.hpp"
#include "actors/scheduler_actor.hpp"
#include "actors/tokenizer_actor.hpp"
#include "actors/vision_actor.hpp"
#include "actors/watchdog.hpp"
#include "model/device.hpp"
#include "model/model_tokenizer.hpp"
#include "model/stage_plan.hpp"

namespace troupe {
namespace {

constexpr auto kAnswerTimeout = std::chrono::seconds(10);

void require(bool ok, const std::string& what) {
  if (!ok) throw Error(Errc::invalid_argument, "PipelineConfig: " + what);
}

// Blocks for an actor's answer (never called on an actor thread).
template <class Reply, class Handle, class Msg>
Reply ask(caf::actor_system& system, const Handle& to, Msg msg, const char* what) {
  caf::scoped_actor self{system};
  Reply out{};
  std::string error;
  bool answered = false;
  self->request(to, kAnswerTimeout, msg)
      .receive([&](Reply& r) {
        out = std::move(r);
        answered = true;
      },
               [&](caf::error& e) { error = system.render(e); });
  if (!answered) throw Error(Errc::internal, std::string("Pipeline::") + what + ": no answer: " + error);
  return out;
}

}  // namespace


struct Pipeline::Impl {
  std::shared_ptr<const Model> model;
  std::shared_ptr<const Tokenizer> tokenizer;
  ModelInfo info;
  std::shared_ptr<OpenRequests> open = std::make_shared<OpenRequests>();
  std::shared_ptr<std::atomic<uint64_t>> refused = std::make_shared<std::atomic<uint64_t>>(0);  // at the front door
  // Set once by the watchdog (under failure_mutex) when an actor stopped.
  std::atomic<bool> failed{false};
  mutable std::mutex failure_mutex;
  std::string failure;
  std::atomic<bool> stopping{false};
  caf::actor watchdog;
  // Names in the actor system's registry; erased at stop (a registered
  // detached actor would otherwise never be destroyed, and the system would
  // wait for it forever).
  std::vector<caf::atom_value> registered;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> system;
  // Every handle is released before the actor system goes (Impl::stop).
  scheduler_actor scheduler;
  detokenizer_actor detokenizer;
  sampler_actor sampler;
  std::vector<executor_actor> stages;
  std::vector<tokenizer_actor> tokenizers;
  vision_actor vision;  // a vision-language model's image encoder; null: text only
  std::shared_ptr<VisionCounters> vision_counters = std::make_shared<VisionCounters>();
  std::vector<observer_actor> observers;
  std::vector<std::shared_ptr<ActorMeter>> meters;  // for actor_loads()
  std::vector<std::shared_ptr<StageStatus>> stage_status;  // one per executor stage
  std::unique_ptr<Tracer> tracer;                   // null: tracing off
  std::shared_ptr<AnomalyMonitor> monitor;
  std::atomic<RequestId> next_id{1};
  std::atomic<uint32_t> next_tokenizer{0};

  ~Impl() { stop(); }

  // The watchdog's thread: `actor` stopped.
  void on_actor_down(const std::string& actor, const std::string& why) {
    if (stopping.load()) return;
    const std::string reason = "the " + actor + " actor stopped: " + why;
    {
      std::lock_guard lock(failure_mutex);
      if (failure.empty()) failure = reason;
    }
    failed.store(true, std::memory_order_release);
    std::fprintf(stderr, "troupe: %s; failing every open request\n", reason.c_str());
    for (auto& [id, sink] : open->take_all()) {
      caf::anon_send(sink, FinalEvent{.id = id,
                                      .reason = EndReason::error,
                                      .error_code = Errc::internal,
                                      .error_message = "request " + std::to_string(id) + " failed: " + reason});
    }
  }

  void stop() {
    if (!system) return;
    stopping = true;  // the actors going down now is no failure
    for (const caf::atom_value key : registered) system->registry().erase(key);
    registered.clear();
    {
      caf::scoped_actor self{*system};
      // Every request still known ends with a cancelled final event: first
      // the scheduler's, then whatever the detokenizer still streams.
      if (scheduler) {
        self->request(scheduler, kAnswerTimeout, shutdown_atom_v).receive([](caf::ok_atom) {}, [](caf::error&) {});
      }
      if (detokenizer) {
        self->request(detokenizer, kAnswerTimeout, shutdown_atom_v)
            .receive([](caf::ok_atom) {}, [](caf::error&) {});
      }
      auto down = [&](const auto& h) {
        if (h) self->send_exit(h, caf::exit_reason::user_shutdown);
      };
      for (const auto& t : tokenizers) down(t);
      down(vision);
      down(scheduler);
      for (const auto& s : stages) down(s);
      down(sampler);
      down(detokenizer);
      for (const auto& o : observers) down(o);
      down(watchdog);
    }
    tokenizers.clear();
    vision = nullptr;
    scheduler = nullptr;
    stages.clear();
    sampler = nullptr;
    detokenizer = nullptr;
    observers.clear();
    watchdog = nullptr;
    system.reset();  // waits for every actor, sinks and their callbacks included
  }
};

Pipeline::Pipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Pipeline::~Pipeline() = default;

std::unique_ptr<Pipeline> Pipeline::start(PipelineConfig config) {
  return start(std::move(config), PipelineExtensions{});
}

std::unique_ptr<Pipeline> Pipeline::start(PipelineConfig config, const PipelineExtensions& extensions) {
  auto impl = std::make_unique<Impl>();
  if (config.model) {
    impl->model = config.model;
  } else {
    require(!config.model_path.empty(), "neither model nor model_path is set");
    impl->model = Model::load(config.model_path, pipeline_load_options(config));
  }
  impl->tokenizer = load_model_tokenizer(*impl->model);
  const ModelConfig& mc = impl->model->config();

  // The context a request may use: the configured one, capped at the
  // trained one and at what the KV pool can hold at all.
  SchedulerConfig sc = config.scheduler;
  sc.whole_prompts = !mc.causal;
  if (mc.n_ctx_train > 0 && sc.context_length > mc.n_ctx_train) {
    sc.context_length = static_cast<int32_t>(mc.n_ctx_train);
  }
  if (config.n_kv_blocks >= 1 && config.kv_block_size >= 1) {
    sc.context_length = static_cast<int32_t>(
        std::min<int64_t>(sc.context_length, static_cast<int64_t>(config.n_kv_blocks) * config.kv_block_size));
  }
  // An encoder computes each prompt in one step: the default step budget
  // grows to its context (ModernBERT's 8192 tokens; vLLM raises
  // max_num_batched_tokens so); a budget set below it is refused by the
  // scheduler, naming it.
  if (sc.whole_prompts && sc.max_tokens_per_step == SchedulerConfig{}.max_tokens_per_step) {
    sc.max_tokens_per_step = std::max(sc.max_tokens_per_step, sc.context_length);
  }
  require(config.kv_block_size >= 1, "kv_block_size must be at least 1");
  require(config.kv_memory_bytes >= 0, "kv_memory_bytes must not be negative");
  if (config.kv_memory_bytes > 0) {
    config.n_kv_blocks = kv_blocks_for_budget(mc, config.kv_type, config.kv_block_size, config.kv_memory_bytes);
  }
  require(config.n_kv_blocks >= 1, "n_kv_blocks must be at least 1");
  require(config.micro_batches >= 0, "micro_batches must not be negative");
  require(config.tokenizer_pool >= 1, "tokenizer_pool must be at least 1");
  require(config.actor_threads >= 1, "actor_threads must be at least 1");
  StageOptions limits{.max_tokens = sc.max_tokens_per_step,
                      .max_seqs = sc.max_batch_size,
                      .n_kv_blocks = config.n_kv_blocks,
                      .kv_block_size = config.kv_block_size,
                      .kv_type = config.kv_type,
                      .embedding_output = pipeline_embedding(config, mc).pooling != Pooling::none};
  std::vector<StagePlacement> placements;
  for (const StageSpec& s : config.stages) {
    placements.push_back({.first_layer = s.first_layer,
                          .last_layer = s.last_layer,
                          .device = s.device,
                          .threads = s.threads,
                          .remote = s.remote});
  }
  if (placements.empty()) placements.push_back({.first_layer = 0, .last_layer = mc.n_layer, .threads = 0});
  if (config.gpu_layers >= 0) {
    const std::string gpu = config.device.empty() || config.device == "cpu" ? "cuda:0" : config.device;
    placements = split_gpu_layers(mc.n_layer, config.gpu_layers, placements.front().threads, gpu);
  } else if (!config.device.empty()) {
    for (StagePlacement& p : placements) p.device = config.device;
  }
  // One engine per stage unless micro_batches says otherwise (plan_stages
  // keeps one stage per placement).
  const int32_t n_engines =
      config.micro_batches > 0 ? config.micro_batches : static_cast<int32_t>(placements.size());
  // A recurrent layer's state is one per sequence in flight: every engine
  // may run max_batch_size of them.
  const int32_t n_state_slots = mc.has_recurrent_layers() ? n_engines * sc.max_batch_size : 0;
  if (n_state_slots > 0 && sc.spec_max_draft > 0) {
    throw Error(Errc::unsupported,
                "PipelineConfig: speculative decoding (--speculative, spec_max_draft) rolls back rejected tokens, "
                "which the recurrent state of " + mc.arch + "'s layers cannot; run this model without it");
  }
  limits.n_state_slots = n_state_slots;
  std::vector<PlannedStage> plan;
  try {
    plan = plan_stages(*impl->model, placements, limits);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("PipelineConfig: ") + e.what());
  }
  impl->info = pipeline_model_info(*impl->model, *impl->tokenizer, plan, sc.context_length, config);
  const auto prompter = std::make_shared<const ChatPrompter>(config.chat_template, impl->model->chat_template(),
                                                             impl->info.bos_text, impl->info.eos_text);
  impl->info.chat_template_origin = prompter->origin();
  // Before any actor: a broken tower or a missing GPU is an error of start().
  PipelineVision vision = open_pipeline_vision(*impl->model, config, placements.front().threads, impl->info);
  set_answer_syntax(impl->info, *prompter, config);
  if (config.micro_batches <= 0 && static_cast<int32_t>(plan.size()) != n_engines) {
    throw Error(Errc::internal, "PipelineConfig: the stage plan does not have one stage per placement");
  }
  const KvCacheOptions kv{.n_blocks = config.n_kv_blocks,
                          .block_size = config.kv_block_size,
                          .prefix_caching = config.prefix_caching,
                          .n_state_slots = n_state_slots};
  // Speculation with a model: its proposer is built (and the draft model
  // loaded and checked) before any actor exists.
  sc.spec_proposer = make_draft_proposer(config, impl->model, config.n_kv_blocks, placements.front().threads);
  { EngineSet check(sc, kv, n_engines); }  // a bad scheduler config throws here, not in an actor

  // The stages open their devices and allocate their KV pages and arenas
  // now, so that a missing GPU or too little memory is an error of start(),
  // before any actor exists. Backends first: a CPU stage in front of a GPU
  // stage takes its output buffers from the GPU's (pinned) host memory.
  // Stages that share a GPU are checked against its free memory together.
  // A remote stage allocates nothing here.
  std::vector<std::shared_ptr<Backend>> backends(plan.size());
  std::map<std::string, DeviceNeeds> device_needs;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedStage& s = plan[i];
    if (s.is_remote()) continue;
    DeviceNeeds& need = device_needs[s.device.str()];
    need.weight_bytes += s.footprint.weight_bytes;
    need.kv_bytes += s.footprint.kv_bytes;
    need.arena_bytes += s.footprint.arena_bytes;
    backends[i] = open_backend(s.device, s.threads, need);
  }
  std::vector<ExecutorParts> parts(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedStage& s = plan[i];
    ExecutorParts& p = parts[i];
    p.status = std::make_shared<StageStatus>(StageHealth{.name = "executor_" + std::to_string(i),
                                                         .where = s.is_remote() ? "remote " + s.remote : s.device.str(),
                                                         .first_layer = s.first_layer,
                                                         .last_layer = s.last_layer});
    impl->stage_status.push_back(p.status);
    if (s.is_remote()) continue;
    p.backend = backends[i];
    p.max_free_buffers = static_cast<size_t>(n_engines) + 1;
    if (s.output == HandOff::pinned) p.output_memory = s.device.is_cuda() ? backends[i] : backends[i + 1];
    if (extensions.before_stage_step) {
      p.before_step = [hook = extensions.before_stage_step, i = static_cast<int32_t>(i)](uint64_t step) {
        hook(i, step);
      };
    }
    StageOptions o = limits;
    o.first_layer = s.first_layer;
    o.last_layer = s.last_layer;
    p.stage = std::make_unique<ModelStage>(impl->model, *p.backend, o);
  }
  backends.clear();

  // Remote stages: what this head expects each worker to hold.
  const bool any_remote = std::any_of(plan.begin(), plan.end(), [](const PlannedStage& s) { return s.is_remote(); });
  const RemoteSettings& rs = config.remote;
  const bool tls = remote_tls(rs);
  std::vector<RemoteStageOptions> remote_options = remote_stage_options(*impl->model, plan, config, limits);
  if (any_remote) {
    impl->cfg.load<caf::io::middleman>();
    if (tls) {
#ifdef TROUPE_HAVE_CAF_OPENSSL
      impl->cfg.openssl_certificate = rs.tls_cert;
      impl->cfg.openssl_key = rs.tls_key;
      impl->cfg.openssl_cafile = rs.tls_ca;
      impl->cfg.load<caf::openssl::manager>();
#else
      throw Error(Errc::unsupported, "PipelineConfig: remote TLS needs CAF's OpenSSL module, which this build lacks");
#endif
    }
  }

  impl->cfg.set("scheduler.max-threads", static_cast<size_t>(config.actor_threads));
  // Idle workers sleep on a condition variable instead of polling (CAF's
  // default work stealing polls every 50 us while idle): the pipeline's
  // light actors run once per step, and polling threads would take CPU from
  // the executors' kernels.
  impl->cfg.set("scheduler.policy", caf::atom("sharing"));
  impl->cfg.add_message_types<caf::id_block::troupe>();
  impl->system = std::make_unique<caf::actor_system>(impl->cfg);
  caf::actor_system& sys = *impl->system;

  // Remote workers are reached and checked before any actor of the chain
  // exists: a refusal (secret, protocol, model, layers, KV) ends start().
  std::vector<RemoteSession> sessions(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    if (plan[i].is_remote()) sessions[i] = open_remote_session(sys, remote_options[i]);
  }
  // A remote last stage samples in its own process (only token ids cross
  // back), unless a custom sampler is plugged in.
  caf::actor remote_sampler = plan.back().is_remote() && !extensions.make_sampler ? sessions.back().sampler : caf::actor{};
  if (remote_sampler) remote_options.back().remote_sampling = true;

  if (config.trace.enabled) {
    require(config.trace.capacity >= 1, "trace.capacity must be at least 1");
    impl->tracer = std::make_unique<Tracer>(config.trace.capacity);
  }
  impl->monitor = std::make_shared<AnomalyMonitor>(std::move(config.on_anomaly));
  // Meters (and trace tracks) in pipeline order, so a trace's tracks read
  // top to bottom as a request flows.
  auto meter = [&](std::string name) {
    std::shared_ptr<TraceTrack> track = impl->tracer ? impl->tracer->add_track(name) : nullptr;
    impl->meters.push_back(std::make_shared<ActorMeter>(std::move(name), std::move(track)));
    return impl->meters.back();
  };
  std::vector<std::shared_ptr<ActorMeter>> tokenizer_meters;
  for (int32_t i = 0; i < config.tokenizer_pool; ++i) {
    tokenizer_meters.push_back(meter(config.tokenizer_pool == 1 ? "tokenizer" : "tokenizer_" + std::to_string(i)));
  }
  const auto scheduler_meter = meter("scheduler");
  std::vector<std::shared_ptr<ActorMeter>> stage_meters;
  for (size_t i = 0; i < parts.size(); ++i) stage_meters.push_back(meter("executor_" + std::to_string(i)));
  if (remote_sampler) {
    impl->sampler = caf::actor_cast<sampler_actor>(remote_sampler);
  } else {
    impl->sampler = extensions.make_sampler ? extensions.make_sampler(sys, impl->model)
                                            : spawn_sampler(sys, impl->tokenizer, {.meter = meter("sampler")});
  }
  impl->detokenizer = spawn_detokenizer(
      sys, impl->tokenizer,
      {.meter = meter("detokenizer"), .monitor = impl->monitor, .anomaly = config.anomaly});
  for (const auto& make : extensions.observers) {
    impl->observers.push_back(make(sys));
    caf::anon_send(impl->detokenizer, caf::add_atom::value, impl->observers.back());
  }
  impl->stages.resize(parts.size());
  executor_actor next;
  for (size_t i = parts.size(); i-- > 0;) {
    if (plan[i].is_remote()) {
      impl->stages[i] = spawn_remote_stage(sys, std::move(remote_options[i]), std::move(sessions[i]), next,
                                           impl->sampler, parts[i].status, stage_meters[i]);
    } else {
      impl->stages[i] = spawn_executor(sys, std::move(parts[i]), next, impl->sampler, stage_meters[i]);
    }
    next = impl->stages[i];
  }
  sessions.clear();
  impl->scheduler = spawn_scheduler(sys, {.scheduler = sc,
                                     .kv = kv,
                                     .n_engines = n_engines,
                                     .monitor = impl->monitor,
                                     .anomaly = config.anomaly,
                                     .forward_ended = any_remote},
                                    impl->stages.front(), impl->sampler, impl->detokenizer, scheduler_meter);
  for (const executor_actor& e : impl->stages) caf::anon_send(e, caf::connect_atom::value, impl->scheduler);
  caf::anon_send(impl->detokenizer, caf::connect_atom::value, impl->scheduler);
  if (vision.model) {
    impl->vision = spawn_vision(sys,
                                {.model = vision.model,
                                 .backend = std::move(vision.backend),
                                 .meter = meter("vision"),
                                 .refused = impl->refused,
                                 .counters = impl->vision_counters},
                                impl->scheduler, impl->detokenizer);
  }
  for (int32_t i = 0; i < config.tokenizer_pool; ++i) {
    impl->tokenizers.push_back(spawn_tokenizer(sys,
                                               {.tokenizer = impl->tokenizer,
                                                .prompter = prompter,
                                                .model = impl->info,
                                                .meter = tokenizer_meters[static_cast<size_t>(i)],
                                                .refused = impl->refused,
                                                .vision = impl->vision},
                                               impl->scheduler, impl->detokenizer));
  }

  // Named in the registry, and watched: when one stops, every open request
  // ends with an error and the pipeline reports the failure.
  std::vector<std::pair<std::string, caf::actor>> watched;
  for (size_t i = 0; i < impl->tokenizers.size(); ++i) {
    watched.emplace_back("tokenizer_" + std::to_string(i), caf::actor_cast<caf::actor>(impl->tokenizers[i]));
  }
  if (impl->vision) watched.emplace_back("vision", caf::actor_cast<caf::actor>(impl->vision));
  watched.emplace_back("scheduler", caf::actor_cast<caf::actor>(impl->scheduler));
  for (size_t i = 0; i < impl->stages.size(); ++i) {
    watched.emplace_back("executor_" + std::to_string(i), caf::actor_cast<caf::actor>(impl->stages[i]));
  }
  if (!remote_sampler) watched.emplace_back("sampler", caf::actor_cast<caf::actor>(impl->sampler));
  watched.emplace_back("detokenizer", caf::actor_cast<caf::actor>(impl->detokenizer));
  for (const auto& [name, handle] : watched) {
    // CAF 0.17 atoms hold at most 10 characters.
    std::string key = name == "detokenizer" ? "detokenize" : name == "tokenizer_0" ? "tokenizer" : name;
    if (key.size() > 10) continue;
    impl->registered.push_back(caf::atom_from_string(key));
    sys.registry().put(impl->registered.back(), caf::actor_cast<caf::strong_actor_ptr>(handle));
  }
  Impl* raw = impl.get();
  impl->watchdog = spawn_watchdog(sys, std::move(watched), [raw](const std::string& actor, const std::string& why) {
    raw->on_actor_down(actor, why);
  });
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(impl)));
}

RequestId Pipeline::submit(EngineRequest request, RequestCallbacks callbacks) {
  Impl& p = *impl_;
  const RequestId id = p.next_id++;
  const int64_t now = steady_now_ns();
  std::weak_ptr<OpenRequests> open = p.open;
  const sink_actor sink =
      spawn_callback_sink(*p.system, id, std::move(callbacks), p.scheduler, [open](RequestId done) {
        if (auto o = open.lock()) o->remove(done);
      });
  p.open->add(id, sink);
  // Checked after the add: a watchdog that failed everything just before it
  // would otherwise miss this one.
  if (p.failed.load(std::memory_order_acquire)) {
    if (p.open->remove(id)) {
      caf::anon_send(sink, FinalEvent{.id = id,
                                      .reason = EndReason::error,
                                      .error_code = Errc::unavailable,
                                      .error_message = "request " + std::to_string(id) +
                                                       ": the pipeline cannot serve: " + failure()});
    }
    return id;
  }
  // The detokenizer knows the sink before anything about the request can
  // reach it: this enqueue happens before the tokenizer's.
  caf::anon_send(p.detokenizer, RequestOpen{.id = id, .params = request.params, .submit_ns = now}, sink);
  const size_t k = p.next_tokenizer++ % p.tokenizers.size();
  caf::anon_send(p.tokenizers[k], PromptRequest{.id = id, .request = std::move(request), .submit_ns = now});
  return id;
}

RequestId Pipeline::submit(TextPrompt prompt, GenerateParams params, RequestCallbacks callbacks) {
  return submit(EngineRequest::from_text(std::move(prompt), std::move(params)), std::move(callbacks));
}

RequestId Pipeline::submit(std::vector<int32_t> prompt, GenerateParams params, RequestCallbacks callbacks) {
  return submit(EngineRequest::from_tokens(std::move(prompt), std::move(params)), std::move(callbacks));
}

void Pipeline::tokenize(EngineRequest request, bool detokenize, std::function<void(TokenizeAnswer)> done) {
  Impl& p = *impl_;
  const tokenizer_actor tok = p.tokenizers[p.next_tokenizer++ % p.tokenizers.size()];
  p.system->spawn([tok, q = TokenizeQuery{.request = std::move(request), .detokenize = detokenize},
                   done = std::move(done)](caf::event_based_actor* self, int) mutable {  // int: see watchdog.cpp
    self->request(tok, kAnswerTimeout, std::move(q))
        .then([done](TokenizeAnswer& a) { done(std::move(a)); },
              [done, self](caf::error& e) {
                done(TokenizeAnswer{.error_code = Errc::unavailable,
                                    .error = "the tokenizer did not answer: " + self->system().render(e)});
              });
  }, 0);
}

void Pipeline::cancel(RequestId id) { caf::anon_send(impl_->scheduler, cancel_atom_v, id); }

PipelineStats Pipeline::stats() const {
  PipelineStats s = ask<PipelineStats>(*impl_->system, impl_->scheduler, stats_atom_v, "stats");
  s.rejected += impl_->refused->load(std::memory_order_relaxed);
  s.images_encoded = impl_->vision_counters->encoded.load(std::memory_order_relaxed);
  s.image_cache_hits = impl_->vision_counters->cache_hits.load(std::memory_order_relaxed);
  return s;
}

KvSnapshot Pipeline::kv_snapshot() const {
  return ask<KvSnapshot>(*impl_->system, impl_->scheduler, kv_atom_v, "kv_snapshot");
}

std::vector<ActorLoad> Pipeline::actor_loads() const {
  std::vector<ActorLoad> out;
  for (const auto& m : impl_->meters) {
    out.push_back({.actor = m->name,
                   .mailbox_depth = m->mailbox_depth.load(std::memory_order_relaxed),
                   .messages = m->messages.load(std::memory_order_relaxed),
                   .busy_seconds = static_cast<double>(m->busy_ns.load(std::memory_order_relaxed)) * 1e-9});
  }
  return out;
}

bool Pipeline::tracing() const { return impl_->tracer != nullptr; }

std::vector<TrackData> Pipeline::trace() const {
  return impl_->tracer ? collect_trace(*impl_->tracer) : std::vector<TrackData>{};
}

void Pipeline::write_trace(const std::string& path) const {
  if (!impl_->tracer) throw Error(Errc::invalid_argument, "Pipeline::write_trace: tracing is off (PipelineConfig::trace)");
  write_chrome_trace_file(path, collect_trace(*impl_->tracer), impl_->tracer->origin_ns());
}

TraceSummary Pipeline::trace_summary() const { return summarize_trace(trace()); }

std::map<std::string, uint64_t> Pipeline::anomaly_counts() const { return impl_->monitor->counts(); }

std::vector<AnomalyEvent> Pipeline::recent_anomalies() const { return impl_->monitor->recent(); }

std::vector<StageHealth> Pipeline::stage_health() const {
  std::vector<StageHealth> out;
  for (const auto& s : impl_->stage_status) out.push_back(s->snapshot());
  return out;
}

bool Pipeline::stages_up() const {
  for (const auto& s : impl_->stage_status) {
    if (!s->up()) return false;
  }
  return true;
}

std::string Pipeline::failure() const {
  if (!impl_->failed.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(impl_->failure_mutex);
  return impl_->failure;
}

const ModelInfo& Pipeline::model_info() const { return impl_->info; }

const Model& Pipeline::model() const { return *impl_->model; }
const Tokenizer& Pipeline::tokenizer() const { return *impl_->tokenizer; }
int32_t Pipeline::n_stages() const { return static_cast<int32_t>(impl_->stages.size()); }
caf::actor_system& Pipeline::system() { return *impl_->system; }

}  // namespace troupe
