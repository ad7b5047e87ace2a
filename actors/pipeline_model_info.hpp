// The facts Pipeline::model_info() publishes, computed once at start.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/pipeline.hpp"
#include "model/stage_plan.hpp"

namespace troupe {

// context_length: the scheduler's, already capped at the trained context
// and at the KV pool.
ModelInfo pipeline_model_info(const Model& model, const Tokenizer& tok, const std::vector<PlannedStage>& plan,
                              int32_t context_length, const PipelineConfig& config);

}  // namespace troupe
