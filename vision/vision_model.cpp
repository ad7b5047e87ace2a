// LLaVA's and Gemma 3's image side from config.json, the image processor's config and the
// safetensors tensors. Hugging Face writes a vision config with only the
// fields that differ from the tower class's defaults, so each tower's
// defaults are spelled out here as transformers has them.
#include "vision/vision_model.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"
#include "vision/tower_layer.hpp"

namespace troupe::vision {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr std::string_view kLlava = "LlavaForConditionalGeneration";
constexpr std::string_view kGemma3 = "Gemma3ForConditionalGeneration";

bool lists_architecture(const HfConfig& cfg, std::string_view name) {
  if (!cfg.has("architectures") || !cfg.json()["architectures"].is_array()) return false;
  return std::any_of(cfg.json()["architectures"].begin(), cfg.json()["architectures"].end(),
                     [&](const Json& a) { return a.is_string() && a.get<std::string>() == name; });
}

bool runs_tower(const HfConfig& cfg) { return lists_architecture(cfg, kLlava) || lists_architecture(cfg, kGemma3); }

int32_t token_id(const HfConfig& cfg, const char* key, const char* alias, int64_t fallback) {
  const char* k = cfg.has(key) || !cfg.has(alias) ? key : alias;
  const int64_t token = cfg.get_int(k, fallback);
  if (token < 0 || token > INT32_MAX) cfg.fail(Errc::bad_format, std::string(k) + " is out of range");
  return static_cast<int32_t>(token);
}

Activation activation(const HfConfig& cfg, const char* key, const std::string& fallback) {
  const std::string act = cfg.get_string(key, fallback);
  if (act == "quick_gelu") return Activation::quick_gelu;
  if (act == "gelu_pytorch_tanh" || act == "gelu_new" || act == "gelu_fast") return Activation::gelu_tanh;
  if (act == "gelu") return Activation::gelu_erf;
  cfg.fail(Errc::unsupported,
           std::string(key) + " '" + act + "' is not supported; supported: quick_gelu, gelu, " + "gelu_pytorch_tanh");
}

// vision_config, over the tower class's defaults (CLIPVisionConfig,
// SiglipVisionConfig).
void read_tower(const HfConfig& top, VisionConfig& v) {
  if (!top.has("vision_config") || !top.json()["vision_config"].is_object()) {
    top.fail(Errc::bad_format, "'vision_config' is missing or not an object");
  }
  const HfConfig cfg(top.json()["vision_config"], top.path() + " (vision_config)");
  const std::string type = cfg.get_string("model_type", "clip_vision_model");
  if (type == "clip_vision_model") {
    v.tower = VisionConfig::Tower::clip;
  } else if (type == "siglip_vision_model") {
    v.tower = VisionConfig::Tower::siglip;
  } else {
    cfg.fail(Errc::unsupported,
             "vision tower '" + type + "' is not supported; supported: clip_vision_model, siglip_vision_model");
  }
  const bool clip = v.tower == VisionConfig::Tower::clip;
  v.hidden = cfg.get_int("hidden_size", 768);
  v.n_ff = cfg.get_int("intermediate_size", 3072);
  v.n_head = cfg.get_int("num_attention_heads", 12);
  v.n_layer = cfg.get_int("num_hidden_layers", 12);
  v.image_size = cfg.get_int("image_size", 224);
  v.patch_size = cfg.get_int("patch_size", clip ? 32 : 16);
  v.norm_eps = static_cast<float>(cfg.get_float("layer_norm_eps", clip ? 1e-5 : 1e-6));
  v.act = activation(cfg, "hidden_act", clip ? "quick_gelu" : "gelu_pytorch_tanh");
  v.class_token = clip;
  if (cfg.get_int("num_channels", 3) != 3) cfg.fail(Errc::unsupported, "num_channels must be 3 (RGB)");
  if (!v.sizes_sane()) {
    cfg.fail(Errc::bad_format,
             "hidden_size, num_attention_heads, num_hidden_layers, image_size and patch_size do "
             "not describe a vision tower (hidden a multiple of the heads, image a multiple of "
             "the patch)");
  }
}

// LLaVA's own fields: which layer's output, which rows, the image token.
void read_llava(const HfConfig& cfg, VisionConfig& v) {
  if (cfg.has("vision_feature_layer") && !cfg.json()["vision_feature_layer"].is_number_integer()) {
    cfg.fail(Errc::unsupported,
             "vision_feature_layer must be one layer; a list of layers (LLaVA-NeXT's "
             "concatenation) is not supported");
  }
  const int64_t layer = cfg.get_int("vision_feature_layer", -2);
  // hidden_states[i]: the embeddings (0), then each layer's output.
  v.n_run = layer < 0 ? v.n_layer + 1 + layer : layer;
  if (v.n_run < 0 || v.n_run > v.n_layer) {
    cfg.fail(Errc::bad_format, "vision_feature_layer " + std::to_string(layer) + " is outside the tower's " +
                                   std::to_string(v.n_layer) + " layers");
  }
  const std::string strategy = cfg.get_string("vision_feature_select_strategy", "default");
  if (strategy != "default" && strategy != "full") {
    cfg.fail(Errc::unsupported, "vision_feature_select_strategy '" + strategy +
                                    "' is not supported; supported: "
                                    "default, full");
  }
  v.drop_first = strategy == "default";
  v.projector_act = activation(cfg, "projector_hidden_act", "gelu");
  v.image_token = token_id(cfg, "image_token_index", "image_token_id", 32000);
}

// Gemma3Config's own fields (its defaults where absent): the tower's last
// hidden state, pooled to mm_tokens_per_image rows, framed by begin/end.
void read_gemma3(const HfConfig& cfg, VisionConfig& v) {
  v.n_run = v.n_layer;
  v.post_norm = true;
  v.projector = VisionConfig::Projector::gemma3;
  v.open_attention = true;
  const int64_t tokens = cfg.get_int("mm_tokens_per_image", 256);
  int64_t side = 1;
  while (side * side < tokens) ++side;
  if (tokens <= 0 || side * side != tokens || v.grid() % side != 0) {
    cfg.fail(Errc::bad_format, "mm_tokens_per_image " + std::to_string(tokens) +
                                   " is not a square whose side divides the tower's " + std::to_string(v.grid()) +
                                   " patches a side");
  }
  v.pool = v.grid() / side;
  v.image_token = token_id(cfg, "image_token_index", "image_token_id", 262144);
  v.image_begin = token_id(cfg, "boi_token_index", "boi_token_id", 255999);
  v.image_end = token_id(cfg, "eoi_token_index", "eoi_token_id", 256000);
}

// transformers writes the processor's settings as preprocessor_config.json
// (the published checkpoints) or, since version 5, under "image_processor"
// in processor_config.json.
ImageProcessorConfig read_processor(const std::string& dir) {
  if (const fs::path p = fs::path(dir) / "preprocessor_config.json"; fs::exists(p)) {
    return load_image_processor_config(p.string());
  }
  const fs::path p = fs::path(dir) / "processor_config.json";
  if (!fs::exists(p)) {
    throw Error(Errc::bad_format, dir +
                                      ": no preprocessor_config.json or processor_config.json: the image "
                                      "processor's settings are needed to read images");
  }
  const HfConfig cfg = HfConfig::load(p.string());
  if (!cfg.has("image_processor") || !cfg.json()["image_processor"].is_object()) {
    cfg.fail(Errc::bad_format, "'image_processor' is missing or not an object");
  }
  return parse_image_processor_config(cfg.json()["image_processor"].dump(), p.string() + " (image_processor)");
}

// The first of `prefixes` under which `probe` exists.
std::string find_prefix(const safetensors::Checkpoint& ckpt, std::initializer_list<std::string_view> prefixes,
                        std::string_view probe, const std::string& what) {
  for (const std::string_view p : prefixes) {
    if (ckpt.find(std::string(p) + std::string(probe)) != nullptr) return std::string(p);
  }
  throw Error(Errc::bad_format, "the checkpoint has no " + what + " (" + std::string(probe) + ")");
}

void bind_tower(HfWeights& src, const VisionConfig& v, VisionWeights& w) {
  const int64_t h = v.hidden;
  const int64_t p = v.patch_size;
  // Conv2d [hidden, 3, p, p]: each output channel's kernel is one row of
  // 3 p p inputs in (channel, y, x) order, the order patches are cut in.
  const safetensors::TensorInfo& conv = src.expect("embeddings.patch_embedding.weight", {h, 3, p, p});
  if (!conv.type)
    throw Error(Errc::unsupported, conv.name + " has dtype " + conv.dtype + "; expected F32, F16 or BF16");
  w.patch = store_f32(src.store(), *conv.type, conv.data, h * 3 * p * p);
  w.patch_b = src.optional_vector("embeddings.patch_embedding.bias", h);
  if (v.class_token) w.class_embd = src.vector("embeddings.class_embedding", h);
  w.pos_embd = src.vector_rows("embeddings.position_embedding.weight", v.n_positions(), h);
  if (v.tower == VisionConfig::Tower::clip) {
    w.pre_norm = src.vector("pre_layrnorm.weight", h);
    w.pre_norm_b = src.vector("pre_layrnorm.bias", h);
  }
  if (v.post_norm) {
    w.post_norm = src.vector("post_layernorm.weight", h);
    w.post_norm_b = src.vector("post_layernorm.bias", h);
  }
  w.tower.layers.resize(static_cast<size_t>(v.n_run));
  for (int64_t il = 0; il < v.n_run; ++il) {
    const std::string b = "encoder.layers." + std::to_string(il) + ".";
    bind_tower_layer(src,
                     {b + "layer_norm1", b + "self_attn.q_proj", b + "self_attn.k_proj", b + "self_attn.v_proj",
                      b + "self_attn.out_proj", b + "layer_norm2", b + "mlp.fc1", b + "mlp.fc2"},
                     h, v.n_ff, w.tower.layers[static_cast<size_t>(il)]);
  }
}

// linear_1 [projector_hidden, hidden] and linear_2 [text_embd,
// projector_hidden]; their widths come from the tensors (the text model's
// n_embd is checked against the text model where both meet).
void bind_projector(HfWeights& src, const safetensors::Checkpoint& ckpt, const std::string& prefix, VisionConfig& v,
                    VisionWeights& w) {
  const safetensors::TensorInfo* l1 = ckpt.find(prefix + "linear_1.weight");
  const safetensors::TensorInfo* l2 = ckpt.find(prefix + "linear_2.weight");
  if (l1 == nullptr || l2 == nullptr || l1->shape.size() != 2 || l2->shape.size() != 2) {
    throw Error(Errc::bad_format,
                "the multimodal projector needs 2-D " + prefix + "linear_1.weight and linear_2.weight");
  }
  v.projector_hidden = l1->shape[0];
  v.text_embd = l2->shape[0];
  w.proj1 = src.matrix("linear_1.weight", v.hidden, v.projector_hidden);
  w.proj2 = src.matrix("linear_2.weight", v.projector_hidden, v.text_embd);
  w.proj1_b = src.optional_vector("linear_1.bias", v.projector_hidden);
  w.proj2_b = src.optional_vector("linear_2.bias", v.text_embd);
}

// Gemma 3's mm_soft_emb_norm [hidden] and mm_input_projection_weight
// [hidden, text_embd] (stored input-major, so transposed for matmul).
void bind_gemma3_projector(HfWeights& src, const safetensors::Checkpoint& ckpt, const std::string& prefix,
                           VisionConfig& v, VisionWeights& w) {
  const safetensors::TensorInfo* p = ckpt.find(prefix + "mm_input_projection_weight");
  if (p == nullptr || p->shape.size() != 2 || p->shape[0] != v.hidden) {
    throw Error(Errc::bad_format, "the multimodal projector needs a 2-D " + prefix + "mm_input_projection_weight of " +
                                      std::to_string(v.hidden) + " rows");
  }
  v.text_embd = p->shape[1];
  w.soft_proj = src.transposed("mm_input_projection_weight", v.hidden, v.text_embd);
  w.soft_norm = src.vector_plus_one("mm_soft_emb_norm.weight", v.hidden);
}

}  // namespace

bool VisionModel::declared(const std::string& dir) {
  const fs::path config = fs::path(dir) / "config.json";
  return fs::is_directory(dir) && fs::exists(config) && runs_tower(HfConfig::load(config.string()));
}

std::string VisionModel::unsupported_reason(const std::string& dir) {
  const fs::path config = fs::path(dir) / "config.json";
  if (!fs::exists(config)) return {};
  const HfConfig cfg = HfConfig::load(config.string());
  if (runs_tower(cfg) || !cfg.has("vision_config")) return {};
  std::string listed = "this architecture";
  if (cfg.has("architectures") && cfg.json()["architectures"].is_array() && !cfg.json()["architectures"].empty() &&
      cfg.json()["architectures"][0].is_string()) {
    listed = cfg.json()["architectures"][0].get<std::string>();
  }
  return "Troupe runs the text model of " + listed +
         " but not its vision tower; images are refused (LLaVA's CLIP and SigLIP towers and Gemma 3's are read)";
}

std::shared_ptr<const VisionModel> VisionModel::load(const std::string& dir) {
  const fs::path config = fs::path(dir) / "config.json";
  if (!fs::is_directory(dir) || !fs::exists(config)) return nullptr;
  const HfConfig cfg = HfConfig::load(config.string());
  if (!runs_tower(cfg)) return nullptr;
  const bool gemma3 = lists_architecture(cfg, kGemma3);

  auto m = std::shared_ptr<VisionModel>(new VisionModel());
  VisionConfig& v = m->config_;
  read_tower(cfg, v);
  if (gemma3) {
    if (v.tower != VisionConfig::Tower::siglip) cfg.fail(Errc::unsupported, "Gemma 3's vision tower must be SigLIP");
    read_gemma3(cfg, v);
  } else {
    read_llava(cfg, v);
  }
  m->processor_ = read_processor(dir);
  const std::optional<PixelSize> out = fixed_output_size(m->processor_);
  if (!out || out->height != v.image_size || out->width != v.image_size) {
    throw Error(Errc::bad_format, dir + ": the image processor does not make the tower's " +
                                      std::to_string(v.image_size) + "x" + std::to_string(v.image_size) +
                                      " images (its size or crop_size differs, or depends on the image)");
  }

  m->checkpoint_ = safetensors::Checkpoint::open_dir(dir);
  HfWeights src(m->checkpoint_, m->store_);
  const std::string tower = find_prefix(
      m->checkpoint_,
      {"vision_tower.vision_model.", "vision_tower.", "model.vision_tower.vision_model.", "model.vision_tower."},
      "embeddings.patch_embedding.weight", "vision tower");
  src.rename_prefix("", tower);
  bind_tower(src, v, m->weights_);
  const std::string projector =
      find_prefix(m->checkpoint_, {"multi_modal_projector.", "model.multi_modal_projector."},
                  gemma3 ? "mm_input_projection_weight" : "linear_1.weight", "multimodal projector");
  src.rename_prefix("", projector);
  if (gemma3) {
    bind_gemma3_projector(src, m->checkpoint_, projector, v, m->weights_);
  } else {
    bind_projector(src, m->checkpoint_, projector, v, m->weights_);
  }

  m->set_tower_config(fs::path(dir).filename().string());
  return m;
}

void VisionModel::set_tower_config(const std::string& name) {
  const VisionConfig& v = config_;
  ModelConfig& t = tower_config_;
  t.name = name + " (vision tower)";
  t.arch = "vision-tower";
  t.n_layer = v.n_run;
  t.n_embd = v.hidden;
  t.n_head = v.n_head;
  t.n_head_kv = v.n_head;
  t.head_dim = v.hidden / v.n_head;
  t.n_ff = v.n_ff;
  t.norm_eps = v.norm_eps;
  t.causal = false;
  t.n_rot = 0;
  t.gelu_quick = v.act == Activation::quick_gelu;
  t.gelu_erf = v.act == Activation::gelu_erf;
}

}  // namespace troupe::vision
