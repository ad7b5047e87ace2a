// Data-parallel replicas from a topology file: the optional top-level
// "replicas" array, each entry a whole chain (stages, kv, scheduler, ...)
// that inherits the top-level keys it does not set. `troupe serve` runs
// one pipeline per entry behind one edge (net/replica_backend.hpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "actors/pipeline.hpp"

namespace troupe {

// One PipelineConfig per entry of "replicas"; empty when the key is absent.
// An entry's object-valued keys ("kv", "scheduler", ...) merge key by key
// with the top level's; other keys replace them. Entries may not set
// "model" (the replicas share one loaded model), "server" or "replicas".
// Each entry is then read by parse_pipeline_config, so its rules and
// messages are the topology's own, prefixed with "replicas[i]".
// Throws Error(bad_format) naming the key at fault.
std::vector<PipelineConfig> parse_replicas(std::string_view json, const std::string& origin = "config");

}  // namespace troupe
