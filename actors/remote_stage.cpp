// Remote stage link: requests to the worker with a deadline, the steps in
// flight, the worker's monitor, and reconnection through the middleman's
// actor (connect, then the handshake), all without blocking.
#include "actors/remote_stage.hpp"

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#ifdef TROUPE_HAVE_CAF_OPENSSL
#include <caf/openssl/manager.hpp>
#include <caf/openssl/remote_actor.hpp>
#endif

#include <charconv>
#include <map>
#include <set>

#include "actors/actor_meter.hpp"
#include "actors/stage_step.hpp"
#include "core/error.hpp"

namespace troupe {
namespace {

constexpr std::chrono::milliseconds kFirstBackoff{200};

StageHello make_hello(const RemoteStageOptions& o) {
  return {.wire_version = o.wire_version, .json = hello_json(o.expect, o.secret)};
}

std::string refused(const RemoteStageOptions& o, const StageWelcome& w) {
  return "the stage worker at " + o.where() + " refused this head: " + refusal_sentence(w.json);
}

class RemoteStageImpl : public caf::event_based_actor {
 public:
  RemoteStageImpl(caf::actor_config& cfg, RemoteStageOptions options, RemoteSession session, executor_actor next,
                  sampler_actor sampler, std::shared_ptr<StageStatus> status)
      : caf::event_based_actor(cfg),
        options_(std::move(options)),
        worker_(std::move(session.worker)),
        session_(session.session),
        next_(std::move(next)),
        sampler_(std::move(sampler)),
        status_(std::move(status)) {}

  caf::behavior make_behavior() override {
    set_down_handler([this](caf::down_msg& d) {
      if (worker_ && d.source == worker_.address()) lost("its process or connection went away (" + system().render(d.reason) + ")");
    });
    if (worker_) monitor(worker_);
    return {
        [this](StageBatch& b) { on_batch(b); },
        [this](caf::connect_atom, scheduler_actor s) {
          scheduler_ = std::move(s);
          tell_scheduler();
        },
        [this](ForgetRequests& f) {
          if (worker_) send(worker_, ForgetRequests{.session = session_, .ids = f.ids});
          if (next_) send(next_, std::move(f));
        },
        [this](reconnect_atom) { start_reconnect(); },
    };
  }

  void on_exit() override {
    worker_ = nullptr;
    next_ = nullptr;
    sampler_ = nullptr;
    scheduler_ = nullptr;
  }

 private:
  std::string stage_name() const {
    return "remote stage " + options_.where() + " (layers " + std::to_string(options_.expect.first_layer) + "-" +
           std::to_string(options_.expect.last_layer - 1) + ")";
  }

  // With sampling on the worker: the worker's sampler answers this head's
  // scheduler.
  void tell_scheduler() {
    if (options_.remote_sampling && worker_ && scheduler_) {
      send(worker_, StageScheduler{.session = session_, .scheduler = caf::actor_cast<caf::actor>(scheduler_)});
    }
  }

  void fail(const StageBatch& b, Errc code, const std::string& message, bool stage_lost) {
    if (scheduler_) {
      send(scheduler_, StepFailed{.step = b.step, .engine = b.engine, .code = code, .message = message,
                                  .stage_lost = stage_lost});
    }
  }

  void on_batch(StageBatch& b) {
    if (!worker_) {
      fail(b, Errc::unavailable, stage_name() + " is down: " + status_->snapshot().error, false);
      return;
    }
    const uint64_t key = next_key_++;
    // What the next hop needs besides the output: everything but the input.
    StageBatch meta{.step = b.step, .engine = b.engine, .seqs = b.seqs, .tokens = b.tokens, .compute_ns = b.compute_ns};
    in_flight_.emplace(key, std::move(meta));
    request(worker_, options_.step_timeout, RemoteStep{.session = session_, .batch = std::move(b)})
        .then([this, key](StageOutput& o) { on_output(key, o); },
              [this, key](caf::error& e) {
                if (in_flight_.count(key) == 0) return;  // failed already, with the rest of its session
                lost(e == caf::sec::request_timeout
                         ? "no answer to a step within " + std::to_string(options_.step_timeout.count()) + " ms"
                         : system().render(e));
              });
  }

  void on_output(uint64_t key, StageOutput& o) {
    const auto it = in_flight_.find(key);
    if (it == in_flight_.end()) return;
    StageBatch b = std::move(it->second);
    in_flight_.erase(it);
    if (o.sampled) return;  // the worker's sampler has answered the scheduler
    if (!o.error.empty()) {
      // Another head took the worker over: its pages are no longer ours.
      if (o.code == Errc::unavailable) {
        in_flight_.emplace(key, std::move(b));
        lost(o.error);
        return;
      }
      fail(b, o.code, stage_name() + ": " + o.error, false);
      return;
    }
    int64_t n_tokens = 0, n_logit_rows = 0;
    for (const StageSeq& s : b.seqs) {
      n_tokens += s.n_tokens;
      n_logit_rows += s.n_logits;
    }
    const bool last = !next_;
    const int64_t rows = last ? n_logit_rows : n_tokens;
    if (!o.out || o.out->rows != rows) {
      fail(b, Errc::internal, stage_name() + " answered step " + std::to_string(b.step) + " with a tensor of the wrong shape",
           false);
      return;
    }
    b.compute_ns += o.compute_ns;
    if (!last) {
      b.hidden = std::move(o.out);
      send(next_, std::move(b));
      return;
    }
    StepLogits logits = step_logits(b, std::move(o.out), b.compute_ns);
    caf::send_as(scheduler_, sampler_, std::move(logits));
  }

  // The worker died, hung past the deadline, or was taken over: every step
  // in flight through it fails, and the scheduler fails every request whose
  // KV it held. Then reconnect.
  void lost(const std::string& why) {
    if (!worker_) return;
    const std::string message = stage_name() + " was lost: " + why;
    std::fprintf(stderr, "troupe: %s; reconnecting\n", message.c_str());
    status_->set_down(why);
    demonitor(worker_.address());
    worker_ = nullptr;
    session_ = 0;
    if (in_flight_.empty()) {
      if (scheduler_) {
        send(scheduler_, StepFailed{.step = 0, .engine = -1, .code = Errc::unavailable, .message = message,
                                    .stage_lost = true});
      }
    }
    for (const auto& [key, b] : in_flight_) fail(b, Errc::unavailable, message, true);
    in_flight_.clear();
    backoff_ = kFirstBackoff;
    delayed_send(this, backoff_, reconnect_atom_v);
  }

  // Asynchronous, through the middleman's own actor: no blocking helper.
  // (A detached helper that spoke to the worker would stay in CAF's
  // registry of actors a remote node knows, and the actor system would
  // wait for its thread forever at shutdown.)
  void start_reconnect() {
    if (worker_ || connecting_) return;
    connecting_ = true;
    const caf::io::middleman_actor mm = middleman();
    request(mm, options_.hello_timeout, caf::connect_atom::value, options_.host, options_.port)
        .then(
            [this](caf::node_id&, caf::strong_actor_ptr& ptr, std::set<std::string>&) {
              if (!ptr) {
                on_reconnect_failed("nothing is published at " + options_.where());
                return;
              }
              hello(caf::actor_cast<stage_worker_actor>(std::move(ptr)));
            },
            [this](caf::error& e) {
              on_reconnect_failed("cannot reach the stage worker at " + options_.where() + ": " + system().render(e));
            });
  }

  caf::io::middleman_actor middleman() {
#ifdef TROUPE_HAVE_CAF_OPENSSL
    if (options_.tls) return system().openssl_manager().actor_handle();
#endif
    return system().middleman().actor_handle();
  }

  void hello(stage_worker_actor w) {
    request(w, options_.hello_timeout, make_hello(options_))
        .then(
            [this, w](StageWelcome& welcome) {
              if (!welcome.accepted) {
                on_reconnect_failed(refused(options_, welcome));
                return;
              }
              on_reconnected(w, welcome.session, std::move(welcome.sampler));
            },
            [this](caf::error& e) {
              on_reconnect_failed("the stage worker at " + options_.where() +
                                  " did not answer the handshake: " + system().render(e));
            });
  }

  void on_reconnected(stage_worker_actor w, uint64_t session, caf::actor sampler) {
    connecting_ = false;
    worker_ = std::move(w);
    session_ = session;
    monitor(worker_);
    if (options_.remote_sampling && scheduler_) {
      // The old sampler went with the old worker: the scheduler takes the new one.
      send(scheduler_, caf::connect_atom::value, std::move(sampler));
      tell_scheduler();
    }
    status_->set_up();
    std::fprintf(stderr, "troupe: %s is back (session %llu)\n", stage_name().c_str(),
                 static_cast<unsigned long long>(session));
  }

  void on_reconnect_failed(const std::string& why) {
    connecting_ = false;
    status_->set_down(why);
    backoff_ = std::min(backoff_ * 2, options_.max_backoff);
    delayed_send(this, backoff_, reconnect_atom_v);
  }

  RemoteStageOptions options_;
  stage_worker_actor worker_;  // null while lost
  uint64_t session_ = 0;
  executor_actor next_;
  sampler_actor sampler_;
  scheduler_actor scheduler_;
  std::shared_ptr<StageStatus> status_;
  std::map<uint64_t, StageBatch> in_flight_;  // sent, not answered; by send order
  uint64_t next_key_ = 1;
  bool connecting_ = false;
  std::chrono::milliseconds backoff_ = kFirstBackoff;
};

}  // namespace

std::pair<std::string, uint16_t> parse_host_port(std::string_view text, bool allow_any_port) {
  const size_t colon = text.rfind(':');
  int port = -1;
  if (colon != std::string_view::npos && colon > 0) {
    const std::string_view p = text.substr(colon + 1);
    const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
    if (ec != std::errc{} || end != p.data() + p.size()) port = -1;
  }
  if (port < (allow_any_port ? 0 : 1) || port > 65535) {
    throw Error(Errc::invalid_argument, "'" + std::string(text) + "' is not host:port (a port in " +
                                            (allow_any_port ? "0" : "1") + "..65535)");
  }
  return {std::string(text.substr(0, colon)), static_cast<uint16_t>(port)};
}

RemoteSession open_remote_session(caf::actor_system& system, const RemoteStageOptions& o) {
  caf::expected<stage_worker_actor> worker{caf::error{}};
  if (o.tls) {
#ifdef TROUPE_HAVE_CAF_OPENSSL
    worker = caf::openssl::remote_actor<stage_worker_actor>(system, o.host, o.port);
#else
    throw Error(Errc::unsupported, "TLS to stage workers needs CAF's OpenSSL module, which this build lacks");
#endif
  } else {
    worker = system.middleman().remote_actor<stage_worker_actor>(o.host, o.port);
  }
  if (!worker) {
    const bool other_interface = worker.error() == caf::sec::unexpected_actor_messaging_interface;
    throw Error(other_interface ? Errc::invalid_argument : Errc::unavailable,
                other_interface ? "the process at " + o.where() +
                                      " is not a Troupe stage worker of this protocol (its actor interface differs)"
                                : "cannot reach the stage worker at " + o.where() + ": " + system.render(worker.error()));
  }
  caf::scoped_actor self{system};
  StageWelcome welcome;
  std::string error;
  self->request(*worker, o.hello_timeout, make_hello(o))
      .receive([&](StageWelcome& w) { welcome = std::move(w); },
               [&](caf::error& e) { error = system.render(e); });
  if (!error.empty()) {
    throw Error(Errc::unavailable, "the stage worker at " + o.where() + " did not answer the handshake: " + error);
  }
  if (!welcome.accepted) {
    throw Error(Errc::invalid_argument, refused(o, welcome));
  }
  return {.worker = std::move(*worker),
          .session = welcome.session,
          .worker_facts = parse_facts(welcome.json),
          .sampler = std::move(welcome.sampler)};
}

executor_actor spawn_remote_stage(caf::actor_system& system, RemoteStageOptions options, RemoteSession session,
                                  executor_actor next, sampler_actor sampler, std::shared_ptr<StageStatus> status,
                                  std::shared_ptr<ActorMeter> meter) {
  caf::actor a;
  if (meter) {
    a = system.spawn<Metered<RemoteStageImpl>>(std::move(meter), std::move(options), std::move(session),
                                               std::move(next), std::move(sampler), std::move(status));
  } else {
    a = system.spawn<RemoteStageImpl>(std::move(options), std::move(session), std::move(next), std::move(sampler),
                                      std::move(status));
  }
  return caf::actor_cast<executor_actor>(std::move(a));
}

}  // namespace troupe
