// The image side from llama.cpp's mmproj GGUF files: the vision tower and
// projector a llama-server `--mmproj` reads, as llama.cpp's converters write
// them (convert_hf_to_gguf.py --mmproj for Gemma 3; the LLaVA converter
// convert_image_encoder_to_gguf.py for LLaVA-1.5's CLIP tower). The weights
// are bound in place where the kernels read them as stored; the file keeps
// what transformers computes, so the model runs as from its checkpoint.
#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "model/gguf.hpp"
#include "model/weight_store.hpp"
#include "vision/tower_layer.hpp"
#include "vision/vision_model.hpp"

namespace troupe::vision {
namespace {

struct Mmproj {
  const gguf::GgufFile& f;
  WeightStore& store;

  [[noreturn]] void fail(Errc code, const std::string& what) const { throw Error(code, f.path() + ": " + what); }

  int64_t size(std::string_view key) const {
    const int64_t v = f.get_i64(key);
    if (v <= 0) fail(Errc::bad_format, "'" + std::string(key) + "' must be positive");
    return v;
  }

  const gguf::TensorInfo& tensor(const std::string& name, std::initializer_list<int64_t> shape) const {
    const gguf::TensorInfo& t = f.tensor(name);
    f.expect_shape(t, shape);
    return t;
  }

  // n floats in f32 (a copy where the file stores them in f16 or bf16).
  const float* floats(const gguf::TensorInfo& t, int64_t n) const {
    if (t.type != DType::f32 && t.type != DType::f16 && t.type != DType::bf16) {
      fail(Errc::unsupported,
           "tensor '" + t.name + "' is " + std::string(dtype_name(t.type)) + "; expected f32, f16 or bf16");
    }
    return store_f32(store, t.type, t.data, n);
  }
  const float* vector(const std::string& name, int64_t n) const { return floats(tensor(name, {n}), n); }
  const float* optional_vector(const std::string& name, int64_t n) const {
    return f.find_tensor(name) == nullptr ? nullptr : vector(name, n);
  }

  // GGUF's {n_in, n_out}: n_out rows of n_in, any type the kernels read.
  Weight matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
    const gguf::TensorInfo& t = tensor(name, {n_in, n_out});
    return Weight{.data = t.data, .type = t.type, .n_in = n_in, .n_out = n_out};
  }

  // A matrix stored input-major ({n_out, n_in}: Gemma 3's
  // mm_input_projection_weight, as the converter keeps it), as f32 rows of
  // n_in.
  Weight transposed(const std::string& name, int64_t n_in, int64_t n_out) const {
    const float* src = floats(tensor(name, {n_out, n_in}), n_in * n_out);
    float* dst = store.floats(n_in * n_out);
    for (int64_t i = 0; i < n_in; ++i) {
      for (int64_t o = 0; o < n_out; ++o) dst[o * n_in + i] = src[i * n_out + o];
    }
    return Weight{.data = dst, .type = DType::f32, .n_in = n_in, .n_out = n_out};
  }
};

// The projector type: clip.projector_type, or the vision one of a file
// that also holds an audio encoder.
std::string projector_type(const gguf::GgufFile& f) {
  if (auto t = f.find_string("clip.projector_type")) return *t;
  if (auto t = f.find_string("clip.vision.projector_type")) return *t;
  // The oldest LLaVA files say only that they have LLaVA's projector.
  if (f.find_bool("clip.has_llava_projector").value_or(false)) return "mlp";
  throw Error(Errc::bad_format, f.path() + ": no clip.projector_type: not an image projector");
}

void read_sizes(const Mmproj& m, VisionConfig& v) {
  const gguf::GgufFile& f = m.f;
  v.hidden = m.size("clip.vision.embedding_length");
  v.n_ff = m.size("clip.vision.feed_forward_length");
  v.n_head = m.size("clip.vision.attention.head_count");
  v.n_layer = m.size("clip.vision.block_count");
  v.image_size = m.size("clip.vision.image_size");
  v.patch_size = m.size("clip.vision.patch_size");
  v.norm_eps = f.get_f32("clip.vision.attention.layer_norm_epsilon");
  if (!v.sizes_sane()) {
    m.fail(Errc::bad_format,
           "clip.vision's embedding_length, attention.head_count, block_count, image_size and "
           "patch_size do not describe a vision tower (the width a multiple of the heads, the image "
           "a multiple of the patch)");
  }
  // A CLIP tower has a class row and LayerNorms before its layers; a
  // SigLIP tower neither, and a bias on its patch embedding.
  v.class_token = f.find_tensor("v.class_embd") != nullptr;
  v.tower = v.class_token ? VisionConfig::Tower::clip : VisionConfig::Tower::siglip;
  // use_gelu: the checkpoint's hidden_act is "gelu" (CLIP's is quick_gelu
  // otherwise); SigLIP's is gelu_pytorch_tanh.
  const bool gelu = f.find_bool("clip.use_gelu").value_or(false);
  if (f.find_bool("clip.use_silu").value_or(false)) m.fail(Errc::unsupported, "a tower with SiLU is not read");
  v.act = !v.class_token ? Activation::gelu_tanh : gelu ? Activation::gelu_erf : Activation::quick_gelu;

  // The layers whose output the features are: clip.vision.feature_layer,
  // else every layer the file holds (LLaVA's converter drops those after
  // vision_feature_layer).
  v.n_run = v.n_layer;
  if (const auto layers = f.find_i32_array("clip.vision.feature_layer"); layers && !layers->empty()) {
    if (layers->size() != 1) {
      m.fail(Errc::unsupported,
             "clip.vision.feature_layer lists several layers (LLaVA-NeXT's concatenation); one is read");
    }
    if (layers->front() < 1 || layers->front() > v.n_layer) {
      m.fail(Errc::bad_format, "clip.vision.feature_layer " + std::to_string(layers->front()) +
                                   " is outside the tower's " + std::to_string(v.n_layer) + " layers");
    }
    v.n_run = layers->front();
  }
}

// image_mean / image_std: three per-channel values.
std::array<float, 3> channels(const Mmproj& m, std::string_view key) {
  const std::vector<float> values = m.f.get_f32_array(key);
  if (values.size() != 3) m.fail(Errc::bad_format, "'" + std::string(key) + "' must hold 3 values (R, G, B)");
  return {values[0], values[1], values[2]};
}

// The processor transformers pairs with the tower: CLIP's (the short side
// to the image size, bicubic, a center crop) for LLaVA, Gemma 3's (an exact
// bilinear resize) for Gemma 3; the file's mean and std.
ImageProcessorConfig processor_for(const Mmproj& m, const VisionConfig& v) {
  ImageProcessorConfig p;
  const auto side = static_cast<int32_t>(v.image_size);
  if (v.projector == VisionConfig::Projector::gemma3) {
    p.processor_type = "Gemma3ImageProcessor";
    p.shortest_edge = 0;
    p.resize_height = p.resize_width = side;
    p.resample = Resample::bilinear;
    p.do_center_crop = false;
  } else {
    p.processor_type = "CLIPImageProcessor";
    p.shortest_edge = side;
    p.resample = Resample::bicubic;
    p.crop_height = p.crop_width = side;
  }
  p.image_mean = channels(m, "clip.vision.image_mean");
  p.image_std = channels(m, "clip.vision.image_std");
  return p;
}

void bind_tower(const Mmproj& m, const VisionConfig& v, VisionWeights& w) {
  const int64_t h = v.hidden;
  const int64_t p = v.patch_size;
  // {p, p, 3, hidden}: the conv kernel, one row of 3 p p per output channel.
  w.patch = m.floats(m.tensor("v.patch_embd.weight", {p, p, 3, h}), h * 3 * p * p);
  w.patch_b = m.optional_vector("v.patch_embd.bias", h);
  if (v.class_token) w.class_embd = m.vector("v.class_embd", h);
  w.pos_embd = m.floats(m.tensor("v.position_embd.weight", {h, v.n_positions()}), h * v.n_positions());
  if (v.tower == VisionConfig::Tower::clip) {
    w.pre_norm = m.vector("v.pre_ln.weight", h);
    w.pre_norm_b = m.vector("v.pre_ln.bias", h);
  }
  if (v.post_norm) {
    w.post_norm = m.vector("v.post_ln.weight", h);
    w.post_norm_b = m.vector("v.post_ln.bias", h);
  }
  w.tower.layers.resize(static_cast<size_t>(v.n_run));
  for (int64_t il = 0; il < v.n_run; ++il) {
    const std::string b = "v.blk." + std::to_string(il) + ".";
    // LLaVA's converter names fc1 ffn_down and fc2 ffn_up, the reverse of
    // the newer one: the shapes tell which is which.
    std::string up = b + "ffn_up", down = b + "ffn_down";
    if (m.f.tensor(up + ".weight").shape.front() != h) std::swap(up, down);
    bind_tower_layer(m, {b + "ln1", b + "attn_q", b + "attn_k", b + "attn_v", b + "attn_out", b + "ln2", up, down}, h,
                     v.n_ff, w.tower.layers[static_cast<size_t>(il)]);
  }
}

// LLaVA's two linear layers, mm.0 and mm.2 (the GELU between them is mm.1).
void bind_mlp(const Mmproj& m, VisionConfig& v, VisionWeights& w) {
  const gguf::TensorInfo& l1 = m.f.tensor("mm.0.weight");
  const gguf::TensorInfo& l2 = m.f.tensor("mm.2.weight");
  if (l1.shape.size() != 2 || l2.shape.size() != 2) {
    m.fail(Errc::bad_format, "the projector needs 2-D mm.0.weight and mm.2.weight");
  }
  v.projector_hidden = l1.shape[1];
  v.text_embd = l2.shape[1];
  w.proj1 = m.matrix("mm.0.weight", v.hidden, v.projector_hidden);
  w.proj1_b = m.optional_vector("mm.0.bias", v.projector_hidden);
  w.proj2 = m.matrix("mm.2.weight", v.projector_hidden, v.text_embd);
  w.proj2_b = m.optional_vector("mm.2.bias", v.text_embd);
}

// Gemma 3's soft embedding norm (written as 1 + w already) and input
// projection.
void bind_gemma3(const Mmproj& m, VisionConfig& v, VisionWeights& w) {
  const gguf::TensorInfo& p = m.f.tensor("mm.input_projection.weight");
  if (p.shape.size() != 2 || p.shape[1] != v.hidden) {
    m.fail(Errc::bad_format,
           "mm.input_projection.weight must be 2-D with the tower's " + std::to_string(v.hidden) + " rows");
  }
  v.text_embd = p.shape[0];
  w.soft_proj = m.transposed("mm.input_projection.weight", v.hidden, v.text_embd);
  w.soft_norm = m.vector("mm.soft_emb_norm.weight", v.hidden);
}

int32_t vocab_token(const std::string& path, const VocabData& vocab, std::string_view text, const char* why) {
  const auto it = std::find(vocab.tokens.begin(), vocab.tokens.end(), text);
  if (it == vocab.tokens.end()) {
    throw Error(Errc::bad_format,
                path + ": the text model's vocabulary has no " + std::string(text) + " token, " + why);
  }
  return static_cast<int32_t>(it - vocab.tokens.begin());
}

}  // namespace

std::shared_ptr<const VisionModel> VisionModel::load_mmproj(const std::string& path, const VocabData& text_vocab) {
  auto model = std::shared_ptr<VisionModel>(new VisionModel());
  model->mmproj_.emplace(gguf::GgufFile::open(path));
  const gguf::GgufFile& f = *model->mmproj_;
  const Mmproj m{f, model->store_};
  if (f.get_string("general.architecture") != "clip") {
    m.fail(Errc::bad_format, "general.architecture is '" + f.get_string("general.architecture") +
                                 "', not 'clip': not an mmproj file (a text model goes to --model)");
  }
  if (!f.find_bool("clip.has_vision_encoder").value_or(true))
    m.fail(Errc::unsupported, "the file has no vision encoder");
  VisionConfig& v = model->config_;
  const std::string projector = projector_type(f);
  if (projector == "gemma3") {
    v.projector = VisionConfig::Projector::gemma3;
  } else if (projector != "mlp") {
    m.fail(Errc::unsupported,
           "projector_type '" + projector + "' is not read; read: mlp (LLaVA-1.5), gemma3 (Gemma 3)");
  }
  read_sizes(m, v);
  if (v.projector == VisionConfig::Projector::gemma3) {
    if (v.class_token) m.fail(Errc::bad_format, "Gemma 3's tower is SigLIP, without a class embedding");
    // Gemma3Config's pooling: the converter writes the factor only where it
    // is not Gemma 3's 4 (4096 patches to 256 rows).
    v.pool = f.find_i64("clip.vision.projector.scale_factor").value_or(4);
    if (v.pool <= 0 || v.grid() % v.pool != 0) {
      m.fail(Errc::bad_format, "clip.vision.projector.scale_factor " + std::to_string(v.pool) +
                                   " does not divide the tower's " + std::to_string(v.grid()) + " patches a side");
    }
    v.post_norm = true;
    v.open_attention = true;
    v.image_token = vocab_token(path, text_vocab, "<image_soft_token>", "whose rows Gemma 3's image features take");
    v.image_begin = vocab_token(path, text_vocab, "<start_of_image>", "which Gemma 3's prompts mark images with");
    v.image_end = vocab_token(path, text_vocab, "<end_of_image>", "which follows each of Gemma 3's images");
  } else {
    // LLaVA's "default" feature selection: a CLIP tower's class row is not
    // a feature.
    v.drop_first = v.class_token;
    v.projector_act = Activation::gelu_erf;
    v.image_token = vocab_token(path, text_vocab, "<image>", "which LLaVA's prompts mark images with");
  }
  model->processor_ = processor_for(m, v);
  bind_tower(m, v, model->weights_);
  if (v.projector == VisionConfig::Projector::gemma3) {
    bind_gemma3(m, v, model->weights_);
  } else {
    bind_mlp(m, v, model->weights_);
  }
  model->set_tower_config(f.find_string("general.name").value_or("mmproj"));
  return model;
}

}  // namespace troupe::vision
