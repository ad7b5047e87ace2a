// Replays a planned workload (experiments/workload.hpp) against a running
// `troupe serve` (or any OpenAI-compatible server) over HTTP, and measures
// each request from the client's side: when it was sent, when every
// streamed chunk arrived, when it ended. Also reads the server's /metrics.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "experiments/request_record.hpp"
#include "experiments/workload.hpp"

namespace troupe {

struct LoadClientOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  std::string model;             // the "model" field; empty: the first id of GET /v1/models
  std::string api_key;           // Authorization: Bearer, when set
  int32_t max_connections = 64;  // concurrent streams at most
  double timeout_s = 600;        // per request, connect to last byte
};

// Sends each request at its arrival_s (seconds after the call) or, when
// `clients` > 0, as a closed loop of `clients` (each sends the next plan
// entry when its previous one ends), as
//   POST /v1/completions {"model", "prompt": [token ids], "max_tokens",
//     "stream": true, "stream_options": {"include_usage": true},
//     "temperature": 0, "ignore_eos", "priority": 0 | 1}
// (priority as vLLM's integer: 0 interactive, 1 batch), and reads the SSE
// stream, timestamping every chunk that carries text.
// Open loop: a request whose time has come while max_connections streams
// are open waits for one to end; its sent_s then lags its scheduled_s.
// Returns one record per plan entry, in plan order; times are seconds since
// the call began (steady clock); sent_s is taken before connecting, so
// TTFT includes the connection, as a real client's would. One request's
// failure (refused, timed out, HTTP error, an error event) is a record with
// ok false and a message, never an exception.
std::vector<RequestRecord> run_against_server(const std::vector<PlannedRequest>& plan, bool ignore_eos,
                                              int32_t clients, const LoadClientOptions& options);

// GET /metrics, parsed: the metric's name with its labels as written
// (`troupe_requests_total{endpoint="completions"}`) -> value. Throws
// Error(Errc::io) naming the server when it cannot be read.
std::map<std::string, double> scrape_metrics(const LoadClientOptions& options);

// The Prometheus text format -> the same map; comment and malformed lines
// are skipped.
std::map<std::string, double> parse_metrics_text(std::string_view text);

}  // namespace troupe
