// The GGUF loader behind Model::load, for the llama architecture family (Llama 2/3,
// Mistral, TinyLlama, SmolLM2): hyperparameters from metadata, weights bound
// in place to the mapped tensor data (no copy unless quantization is asked for).
#include <cmath>
#include <numbers>
#include <string>

#include "core/error.hpp"
#include "model/gguf.hpp"
#include "model/gguf_vocab.hpp"
#include "model/model.hpp"
#include "model/model_loaders.hpp"

namespace troupe {
namespace {

class GgufModel final : public Model {
 public:
  explicit GgufModel(gguf::GgufFile file) : file_(std::move(file)) {}
  void bind(const ModelLoadOptions& options);

 private:
  Weight matrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  const float* vector(const std::string& name, int64_t n, bool required = true) const;
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(Errc::bad_format, file_.path() + ": " + what);
  }

  gguf::GgufFile file_;
};

Weight GgufModel::matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  const gguf::TensorInfo& t = file_.tensor(name);
  file_.expect_shape(t, {n_in, n_out});
  return Weight{.data = t.data, .type = t.type, .n_in = n_in, .n_out = n_out};
}

const float* GgufModel::vector(const std::string& name, int64_t n, bool required) const {
  const gguf::TensorInfo* t = file_.find_tensor(name);
  if (t == nullptr) {
    if (required) fail("missing tensor '" + name + "'");
    return nullptr;
  }
  file_.expect_shape(*t, {n});
  if (t->type != DType::f32) fail("tensor '" + name + "' is " + std::string(dtype_name(t->type)) + ", expected f32");
  return static_cast<const float*>(t->data);
}

void GgufModel::bind(const ModelLoadOptions& options) {
  path_ = file_.path();
  const std::string arch = file_.get_string("general.architecture");
  if (arch != "llama") {
    throw Error(Errc::unsupported, file_.path() + ": architecture '" + arch + "' is not supported; supported: llama");
  }
  const std::string p = arch + ".";
  ModelConfig& c = config_;
  c.arch = arch;
  c.name = file_.find_string("general.name").value_or("");
  c.n_embd = file_.get_u32(p + "embedding_length");
  c.n_layer = file_.get_u32(p + "block_count");
  c.n_head = file_.get_u32(p + "attention.head_count");
  c.n_head_kv = file_.find_u32(p + "attention.head_count_kv").value_or(static_cast<uint32_t>(c.n_head));
  c.n_ff = file_.get_u32(p + "feed_forward_length");
  c.n_ctx_train = file_.get_u32(p + "context_length");
  c.norm_eps = file_.get_f32(p + "attention.layer_norm_rms_epsilon");
  if (c.n_embd <= 0 || c.n_layer <= 0 || c.n_head <= 0 || c.n_head_kv <= 0 || c.n_ff <= 0) {
    fail("hyperparameters must be positive");
  }
  if (c.n_embd % c.n_head != 0) fail("embedding_length is not a multiple of head_count");
  if (c.n_head % c.n_head_kv != 0) fail("head_count is not a multiple of head_count_kv");
  c.head_dim = file_.find_u32(p + "attention.key_length").value_or(static_cast<uint32_t>(c.n_embd / c.n_head));
  c.n_rot = file_.find_u32(p + "rope.dimension_count").value_or(static_cast<uint32_t>(c.head_dim));
  if (c.n_rot <= 0 || c.n_rot > c.head_dim || c.n_rot % 2 != 0) fail("rope.dimension_count is out of range");
  c.rope_theta = file_.find_f32(p + "rope.freq_base").value_or(10000.0f);
  // llama.cpp's converter permutes Q/K rows so the adjacent-pair rotation
  // reproduces the original model's rotate-half rotation.
  c.rope_layout = kernels::RopeLayout::normal;
  if (auto type = file_.find_string(p + "rope.scaling.type"); type && *type == "linear") {
    const float factor = file_.get_f32(p + "rope.scaling.factor");
    if (!(factor > 0.0f)) fail("rope.scaling.factor must be positive");
    c.rope_freq_scale = 1.0f / factor;
  }

  const gguf::TensorInfo& embd = file_.tensor("token_embd.weight");
  if (embd.shape.size() != 2) fail("tensor 'token_embd.weight' must have 2 dimensions");
  c.n_vocab = embd.shape[1];
  if (auto v = file_.find_u32(p + "vocab_size"); v && static_cast<int64_t>(*v) != c.n_vocab) {
    fail("vocab_size " + std::to_string(*v) + " does not match token_embd.weight's " + std::to_string(c.n_vocab) +
         " rows");
  }
  if (const gguf::TensorInfo* f = file_.find_tensor("rope_freqs.weight")) {
    file_.expect_shape(*f, {c.n_rot / 2});
    const auto* data = static_cast<const float*>(f->data);
    c.rope_freq_factors.assign(data, data + c.n_rot / 2);
  }

  ModelWeights& w = weights_;
  w.tok_embd = matrix("token_embd.weight", c.n_embd, c.n_vocab);
  w.output_norm = vector("output_norm.weight", c.n_embd);
  c.tied_output = file_.find_tensor("output.weight") == nullptr;
  w.output = c.tied_output ? w.tok_embd : matrix("output.weight", c.n_embd, c.n_vocab);
  // Every layer has tensors of its own: a block_count beyond the tensor
  // table is refused before a list of that many layers is made.
  if (c.n_layer > static_cast<int64_t>(file_.tensors().size())) {
    fail("block_count " + std::to_string(c.n_layer) + " is more than the file's " +
         std::to_string(file_.tensors().size()) + " tensors");
  }
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = vector(b + "attn_norm.weight", c.n_embd);
    l.wq = matrix(b + "attn_q.weight", c.n_embd, c.q_dim());
    l.wk = matrix(b + "attn_k.weight", c.n_embd, c.kv_dim());
    l.wv = matrix(b + "attn_v.weight", c.n_embd, c.kv_dim());
    l.wo = matrix(b + "attn_output.weight", c.q_dim(), c.n_embd);
    l.bq = vector(b + "attn_q.bias", c.q_dim(), false);
    l.bk = vector(b + "attn_k.bias", c.kv_dim(), false);
    l.bv = vector(b + "attn_v.bias", c.kv_dim(), false);
    l.ffn_norm = vector(b + "ffn_norm.weight", c.n_embd);
    l.w_gate = matrix(b + "ffn_gate.weight", c.n_embd, c.n_ff);
    l.w_up = matrix(b + "ffn_up.weight", c.n_embd, c.n_ff);
    l.w_down = matrix(b + "ffn_down.weight", c.n_ff, c.n_embd);
  }

  // What one decode step streams: every matrix once (the embedding lookup
  // reads one row, so it counts only when it doubles as the output head).
  weight_bytes_ = 0;
  for (const gguf::TensorInfo& t : file_.tensors()) {
    if (t.name != "token_embd.weight" || c.tied_output) weight_bytes_ += t.n_bytes;
  }

  if (options.quantize) {
    quantize_weights(w, c, *options.quantize, store_, file_.path());
    weight_bytes_ = decode_weight_bytes(w, c);
  }

  vocab_ = vocab_from_gguf(file_);
  chat_template_ = file_.find_string("tokenizer.chat_template").value_or("");
}

}  // namespace

std::shared_ptr<const Model> load_gguf_model(const std::string& path, const ModelLoadOptions& options) {
  auto model = std::make_shared<GgufModel>(gguf::GgufFile::open(path));
  model->bind(options);
  return model;
}

}  // namespace troupe
