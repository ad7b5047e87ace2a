// The server's Prometheus metrics (all named troupe_*; the list is in
// docs/api.md): latency histograms fed by request events, counters of what
// the edge did, and gauges refreshed from the engine at each scrape. The
// prometheus-cpp registry stays inside metrics.cpp; render() serializes it
// in the text exposition format for GET /metrics.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actors/request_types.hpp"
#include "net/engine_client.hpp"

namespace troupe::net {

// not_ready: loading, or a stage down; cancelled: ended by the client or a
// shutdown before an answer; internal: the engine failed the request.
enum class RejectReason : uint8_t { overload, invalid, unauthorized, too_large, not_ready, cancelled, internal };
enum class DisconnectReason : uint8_t { closed, slow_reader, message_too_big };
enum class ConnectionKind : uint8_t { http, websocket };

// What a scrape reads from the engine and the edge.
struct EngineSnapshot {
  LoadState load;
  bool have_stats = false;  // false before the model is loaded
  PipelineStats stats;
  MemoryPools pools;
  std::vector<ActorLoad> actors;
  std::map<std::string, uint64_t> anomalies;  // flags raised so far, by metric
  std::vector<ActorSummary> actor_summary;    // when the pipeline traces
  std::vector<ReplicaFacts> replicas;         // data-parallel replicas, if any
  int32_t in_flight = 0;  // admitted by the server, not yet ended
  bool breaker_open = false;
};

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Thread-safe recorders.
  void request_started(std::string_view endpoint, int32_t prompt_tokens);
  void first_token(int32_t prompt_tokens);    // the prompt now sits in KV
  void token(double seconds_since_previous);  // < 0: the first token (no gap)
  void request_ended(const FinalEvent& f);
  void rejected(RejectReason r);
  void disconnected(DisconnectReason r);
  void degraded();
  void http_response(int status);
  void connection_opened(ConnectionKind k);
  void connection_closed(ConnectionKind k);

  // Refreshes the gauges from `snap` and returns the text exposition.
  std::string render(const EngineSnapshot& snap);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::net
