// A pipeline's image side: the vision-language model's VisionModel when the
// model's directory has one Troupe runs and the config wants it, and the
// backend its tower runs on, both opened at start (before any actor), so a
// broken tower or a missing GPU is an error of Pipeline::start.
#pragma once

#include <memory>

#include "actors/pipeline.hpp"
#include "kernels/backend.hpp"
#include "vision/vision_model.hpp"

namespace troupe {

struct PipelineVision {
  std::shared_ptr<const vision::VisionModel> model;  // null: the model reads text only
  std::shared_ptr<Backend> backend;                  // config.vision_device, `threads` kernel threads on the CPU
};

// Fills info.image_token and image_tokens for the tokenizer's rules. A
// multimodal model whose tower is not read says so once, on stderr. Throws
// Error naming PipelineConfig's field: a projector that does not fit the
// text model, a bad or missing vision_device.
PipelineVision open_pipeline_vision(const Model& model, const PipelineConfig& config, int threads, ModelInfo& info);

}  // namespace troupe
