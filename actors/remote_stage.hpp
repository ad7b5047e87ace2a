// A stage that lives in another process (`troupe stage`), seen from the
// head: the handshake, and the link actor that stands in the chain where an
// executor would. Steps cross as RemoteStep/StageOutput over CAF's
// middleman; the link keeps several in flight (micro-batches), fails them
// when the worker dies or stops answering, and reconnects with backoff.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "actors/stage_handshake.hpp"
#include "actors/stage_status.hpp"

namespace troupe {

struct ActorMeter;

struct RemoteStageOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string secret;  // sent in the hello; empty: none
  StageFacts expect;   // what this head expects the worker to hold
  // A step without an answer for this long counts as a lost worker.
  std::chrono::milliseconds step_timeout{30000};
  std::chrono::milliseconds hello_timeout{10000};
  std::chrono::milliseconds max_backoff{5000};  // reconnect attempts back off up to this
  bool tls = false;  // CAF's OpenSSL module (the actor system must load it)
  // The worker holds the last layers and samples there (its session's
  // sampler is the scheduler's): the link tells the worker which scheduler
  // to answer, and forwards nothing itself. Off with a custom sampler.
  bool remote_sampling = false;
  uint32_t wire_version = kStageWireVersion;

  std::string where() const { return host + ":" + std::to_string(port); }
};

// "host:port" (host may be a name or an IPv4 address); port 0 ("any free
// port") only where `allow_any_port` (an address to listen on). Throws
// Error(invalid_argument) naming the text.
std::pair<std::string, uint16_t> parse_host_port(std::string_view text, bool allow_any_port = false);

struct RemoteSession {
  stage_worker_actor worker;
  uint64_t session = 0;
  StageFacts worker_facts;
  caf::actor sampler;  // the worker's sampler, when it holds the last layers
};

// Connects and shakes hands; blocks (never call it on an actor thread).
// Throws Error(unavailable) when the worker cannot be reached or does not
// answer, Error(invalid_argument) with the worker's sentence when it
// refuses (wrong secret, protocol, model, layers, KV geometry).
RemoteSession open_remote_session(caf::actor_system& system, const RemoteStageOptions& options);

// The link: StageBatch in, RemoteStep to the worker, its output on to
// `next` (hidden states) or, as the scheduler, to `sampler` (logits). While
// the worker is lost every step fails at once with Errc::unavailable, and
// `status` says why; the first failure of a lost worker carries
// stage_lost, so the scheduler fails the requests whose KV it held.
executor_actor spawn_remote_stage(caf::actor_system& system, RemoteStageOptions options, RemoteSession session,
                                  executor_actor next, sampler_actor sampler, std::shared_ptr<StageStatus> status,
                                  std::shared_ptr<ActorMeter> meter = nullptr);

}  // namespace troupe
