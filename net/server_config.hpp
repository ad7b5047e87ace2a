// `troupe serve` settings from a configs/*.json file: the pipeline topology
// (configs/README.md, read by actors/pipeline_config) plus an optional
// "server" section (listen address, limits, API key, chat template).
// Strict like the topology: an unknown key or a wrong type is an error
// naming it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/pipeline.hpp"
#include "net/replica_router.hpp"
#include "net/routes.hpp"
#include "net/server.hpp"

namespace troupe::net {

struct ServerSettings {
  ServerOptions listen;            // host, port, I/O threads, timeouts
  CoreOptions core;                // limits, admission, API key, chat template source
  std::string model_name;          // the id clients use; empty: from the model file
  std::string chat_template_file;  // read into core.chat_template by the caller
  ReplicaRouting replica_routing;  // how requests spread over "replicas", when there are several
};

struct ServeConfig {
  PipelineConfig pipeline;
  // "replicas" (actors/replica_config.hpp): when not empty, the server runs
  // one chain per entry behind one edge, and `pipeline` is only their
  // common top level.
  std::vector<PipelineConfig> replicas;
  ServerSettings server;
};

// `origin` names the text in errors; relative paths ("model",
// "server.chat_template_file") are taken relative to `base_dir`.
ServeConfig parse_serve_config(std::string_view json, const std::string& origin, const std::string& base_dir = {});
// Throws Error(io) for an unreadable file, Error(bad_format) for bad content.
ServeConfig load_serve_config(const std::string& path);

}  // namespace troupe::net
