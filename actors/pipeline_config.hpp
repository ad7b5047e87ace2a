// Pipeline topologies from JSON files (configs/*.json; the format is in
// configs/README.md): stages and their layer ranges and threads, KV pool,
// scheduler knobs. Unknown keys and wrong types are errors that name the key.
#pragma once

#include <string>
#include <string_view>

#include "actors/pipeline.hpp"

namespace troupe {

// `origin` names the text in error messages (a file name). A relative
// "model" path is kept as written.
PipelineConfig parse_pipeline_config(std::string_view json, const std::string& origin = "config");

// Reads a file; a relative "model" path is taken relative to the file's
// folder. Throws Error(io) for an unreadable file, Error(bad_format) for bad
// content.
PipelineConfig load_pipeline_config(const std::string& path);

}  // namespace troupe
