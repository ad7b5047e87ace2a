// Drives a planned workload through a Pipeline in this process: submits
// each request at its arrival time (open loop) or keeps `clients` requests
// in flight (closed loop), and timestamps every token as its callback
// fires. Nothing crosses a socket, so the figures are the engine's own.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/pipeline.hpp"
#include "experiments/request_record.hpp"
#include "experiments/workload.hpp"

namespace troupe {

struct LoadOptions {
  int32_t clients = 0;      // > 0: closed loop with this many in flight; 0: arrival times
  bool ignore_eos = true;   // generate the planned output lengths exactly
  float temperature = 0.0f;
  double timeout_s = 600;   // the whole run; what is still running then is cancelled
};

// Blocks until every request has ended. Records are in plan order.
std::vector<RequestRecord> run_in_process(Pipeline& pipeline, const std::vector<PlannedRequest>& plan,
                                          const LoadOptions& options);

}  // namespace troupe
