// A vision-language model's image side, read from a Hugging Face directory
// or from llama.cpp's mmproj GGUF file (vision/vision_mmproj.cpp):
//   LLaVA (LlavaForConditionalGeneration): a CLIP or SigLIP vision tower,
//     the layer its features come from, and the two-layer projector into the
//     text model's embeddings;
//   Gemma 3 (Gemma3ForConditionalGeneration): a SigLIP tower's last hidden
//     state, average-pooled to mm_tokens_per_image rows, RMS-normed and
//     projected; its image tokens see their whole image.
// The text model itself is the ordinary Model the same directory loads
// (model/arch_llava.cpp, model/arch_gemma.cpp). Immutable once loaded.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "model/gguf.hpp"
#include "model/model.hpp"
#include "model/safetensors.hpp"
#include "model/weight_store.hpp"
#include "vision/image_processor.hpp"

namespace troupe::vision {

enum class Activation : uint8_t { quick_gelu, gelu_tanh, gelu_erf };

struct VisionConfig {
  enum class Tower : uint8_t { clip, siglip };
  enum class Projector : uint8_t {
    llava_mlp,  // linear_1, act, linear_2 over each row
    gemma3,     // pool x pool patches averaged, RMSNorm (1 + w), one matmul
  };
  Tower tower = Tower::clip;
  Projector projector = Projector::llava_mlp;
  int64_t hidden = 0;  // the tower's width
  int64_t n_ff = 0;
  int64_t n_head = 0;
  int64_t n_layer = 0;  // the tower's layers
  int64_t n_run = 0;    // the layers run: the features are their output (vision_feature_layer)
  int64_t image_size = 0;
  int64_t patch_size = 0;
  float norm_eps = 1e-5f;
  Activation act = Activation::quick_gelu;
  bool class_token = false;  // CLIP: a learned row before the patches
  bool drop_first = false;   // vision_feature_select_strategy "default": the first row is not a feature
  bool post_norm = false;    // the tower's post_layernorm over its output (Gemma 3's last_hidden_state)
  int64_t pool = 1;          // Gemma 3: the side of each square of patches averaged into one row
  Activation projector_act = Activation::gelu_erf;
  int64_t projector_hidden = 0;  // linear_1's output
  int64_t text_embd = 0;         // linear_2's output: the text model's n_embd
  int32_t image_token = -1;      // the image token each image's features replace
  // Gemma 3: the token the chat template writes for an image, which its
  // processor replaces with "\n\n" begin, the image tokens, end "\n\n".
  int32_t image_begin = -1;
  int32_t image_end = -1;
  // An image's tokens see the whole image, later ones too (Gemma 3's
  // bidirectional attention within an image), not only those before them.
  bool open_attention = false;

  // Whether the sizes describe a tower: hidden a multiple of the heads, the
  // image a multiple of the patch, each within what a real tower has.
  bool sizes_sane() const {
    return hidden > 0 && n_ff > 0 && n_head > 0 && hidden % n_head == 0 && n_layer > 0 && patch_size > 0 &&
           image_size >= patch_size && image_size % patch_size == 0 && image_size <= 8192 && hidden <= 65536 &&
           n_ff <= 1 << 20 && n_layer <= 1024;
  }
  int64_t grid() const { return image_size / patch_size; }
  int64_t n_patches() const { return grid() * grid(); }
  int64_t n_positions() const { return n_patches() + (class_token ? 1 : 0); }
  // Feature rows, and so image tokens, per image.
  int32_t image_tokens() const {
    if (projector == Projector::gemma3) return static_cast<int32_t>((grid() / pool) * (grid() / pool));
    return static_cast<int32_t>(n_positions() - (drop_first ? 1 : 0));
  }
};

struct VisionWeights {
  const float* patch = nullptr;       // [hidden, 3 patch patch]: the conv kernel, one row per output channel
  const float* patch_b = nullptr;     // [hidden] (SigLIP)
  const float* class_embd = nullptr;  // [hidden] (CLIP)
  const float* pos_embd = nullptr;    // [n_positions, hidden]
  const float* pre_norm = nullptr;    // [hidden] CLIP's pre_layrnorm
  const float* pre_norm_b = nullptr;
  const float* post_norm = nullptr;  // [hidden] SigLIP's post_layernorm (Gemma 3)
  const float* post_norm_b = nullptr;
  ModelWeights tower;  // layers: layer_norm1/2, q/k/v/out_proj, fc1 (w_up), fc2 (w_down), biases
  Weight proj1;        // [projector_hidden, hidden]
  const float* proj1_b = nullptr;
  Weight proj2;  // [text_embd, projector_hidden]
  const float* proj2_b = nullptr;
  const float* soft_norm = nullptr;  // [hidden] Gemma 3's mm_soft_emb_norm, as 1 + w
  Weight soft_proj;                  // [text_embd, hidden] Gemma 3's mm_input_projection_weight, transposed
};

class VisionModel {
 public:
  // The image side of the model at `dir`, or null when its config.json
  // names no architecture whose vision tower Troupe runs (a text model).
  // Throws Error naming the file and the problem for one it should run but
  // cannot (a missing tensor, an unsupported tower or processor).
  static std::shared_ptr<const VisionModel> load(const std::string& dir);

  // The image side in llama.cpp's mmproj GGUF file at `path` (`--mmproj`):
  // a CLIP tower with LLaVA's MLP projector (projector_type "mlp", as
  // llama.cpp's LLaVA converter writes it) or Gemma 3's SigLIP tower and
  // projector ("gemma3"), read as transformers runs them. The image tokens,
  // which an mmproj does not name, are found by their text in the text
  // model's vocabulary (LLaVA's <image>; Gemma 3's <image_soft_token>,
  // <start_of_image>, <end_of_image>). Throws Error naming the file and
  // the problem (not a CLIP file, a projector not read, a missing tensor or
  // token).
  static std::shared_ptr<const VisionModel> load_mmproj(const std::string& path, const VocabData& text_vocab);

  // Whether the directory's config.json names an architecture whose vision
  // tower Troupe runs (cheap: reads config.json alone).
  static bool declared(const std::string& dir);

  // For a multimodal checkpoint whose vision tower Troupe does not run
  // (Qwen3-VL, Mistral 3: their text models load alone), why
  // images are refused; "" otherwise.
  static std::string unsupported_reason(const std::string& dir);

  const VisionConfig& config() const { return config_; }
  const VisionWeights& weights() const { return weights_; }
  const ImageProcessorConfig& processor() const { return processor_; }
  // The config of the tower's layers as the shared layer blocks read it
  // (model/layers.hpp): an encoder of hidden width, LayerNorms, GELU.
  const ModelConfig& tower_config() const { return tower_config_; }

 private:
  // tower_config_ from config_, the tower named `name`.
  void set_tower_config(const std::string& name);

  VisionConfig config_;
  VisionWeights weights_;
  ImageProcessorConfig processor_;
  ModelConfig tower_config_;
  // The mappings the weights point into: a checkpoint's, or an mmproj's.
  safetensors::Checkpoint checkpoint_;
  std::optional<gguf::GgufFile> mmproj_;
  WeightStore store_;
};

}  // namespace troupe::vision
