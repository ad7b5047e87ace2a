// A head's view of its remote stages before it reaches them: for each
// planned stage held by a `troupe stage` worker, where it is and what the
// handshake expects of it (model, layers, KV geometry, step limits, state
// slots). Pipeline::start connects with these.
#pragma once

#include <vector>

#include "actors/pipeline.hpp"
#include "actors/remote_stage.hpp"
#include "model/stage_plan.hpp"

namespace troupe {

// One entry per planned stage, empty for local ones. `limits`: the stages'
// step limits and state slots (as the local stages get them). Throws
// Error(invalid_argument) for TLS settings given in part or a bad address.
std::vector<RemoteStageOptions> remote_stage_options(const Model& model, const std::vector<PlannedStage>& plan,
                                                     const PipelineConfig& config, const StageOptions& limits);

// Whether remote.tls_* ask for TLS (the certificate, key or CA given).
bool remote_tls(const RemoteSettings& settings);

}  // namespace troupe
