// A VisionModel run on a Backend: an image's pixels to the rows that take
// its image tokens' place in the text model's input. The tower's
// layers are the shared encoder blocks (model/layers.hpp: pre-LayerNorm
// attention over all patches, then the GELU MLP), so any backend that runs
// a text model runs the tower. One image at a time; not thread-safe (one
// encoder per vision actor).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kernels/backend.hpp"
#include "memory/paged_kv.hpp"
#include "memory/step_arena.hpp"
#include "model/layers.hpp"
#include "vision/vision_model.hpp"

namespace troupe::vision {

class VisionEncoder {
 public:
  // Uploads the model's weights into the backend and sizes the step's
  // memory for one image. kv_type: the element type of the tower's keys and
  // values; empty: default_kv_type's.
  VisionEncoder(std::shared_ptr<const VisionModel> model, Backend& backend,
                std::optional<KvType> kv_type = std::nullopt);
  ~VisionEncoder();
  VisionEncoder(const VisionEncoder&) = delete;
  VisionEncoder& operator=(const VisionEncoder&) = delete;

  // pixels [3, image_size, image_size] as the image processor makes them ->
  // out [image_tokens, text_embd] (host memory).
  void encode(std::span<const float> pixels, float* out);

  // decode_image, preprocess, encode: the features of a PNG or JPEG.
  // Throws Error(invalid_argument) for bytes that are not a readable image.
  std::vector<float> encode_image(std::span<const uint8_t> bytes);

  const VisionModel& model() const { return *model_; }
  KvType kv_type() const { return kv_.type; }

  // The keys' and values' type a tower gets unless told (vision_encoder.cpp
  // says why).
  static KvType default_kv_type(const VisionModel& model);

 private:
  // x [n_positions, hidden]: patches through the conv's kernels, the class
  // row, the position rows, CLIP's pre-norm.
  void embed(const float* pixels, float* x);
  void project(const float* rows, float* out);    // LLaVA's MLP
  void pool_project(const float* x, float* out);  // Gemma 3's pool, norm, matmul

  std::shared_ptr<const VisionModel> model_;
  Backend& backend_;
  VisionWeights weights_;  // in backend memory (class_embd stays the host's; patch unused)
  Weight patch_matrix_;    // the conv's kernels [hidden, 3 patch patch], a matrix for matmul
  std::vector<void*> owned_;
  StepArena arena_;
  PagedKvView kv_;  // one image's keys and values, reused by every layer
  std::vector<int32_t> block_table_;
  std::vector<int32_t> pos_;
  std::vector<float> patches_;  // [n_patches, 3 patch patch] host
  std::vector<float> rows_;     // [n_patches, hidden] host: the tower's output, to pool (Gemma 3)
  std::vector<float> pooled_;   // [image_tokens, hidden] host
  layers::HostScratch host_;
};

}  // namespace troupe::vision
