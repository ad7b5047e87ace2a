// ModernBERT (ModernBertModel, ModernBertForSequenceClassification): the
// encoder behind gte-modernbert, modernbert-embed and many classifiers. A
// pre-norm encoder (LayerNorm without biases, none before the first
// layer's attention), rotary positions, a fused Wqkv, bidirectional
// attention that is global every global_attn_every_n_layers layers and
// local (each token sees local_attention / 2 tokens either side) between
// them, each kind with its own RoPE base, a GeGLU MLP (the exact GELU of
// Wi's first half times its second; SwiGLU where hidden_activation is silu), a LayerNorm after the embeddings and
// a final one. No biases (attention biases where the config asks for them).
//
// The classifier's head: dense, GELU, LayerNorm over the [CLS] row
// (classifier_pooling "cls"), then the projection to the labels.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"
#include "model/model_loaders.hpp"
#include "model/sequence_classifier.hpp"

namespace troupe {
namespace {

// The GELU a config names: transformers' "gelu" is the erf form.
void check_gelu(const HfConfig& cfg, const char* key) {
  const std::string act = cfg.get_string(key, "gelu");
  if (act != "gelu") cfg.fail(Errc::unsupported, std::string(key) + " '" + act + "' is not supported; supported: gelu");
}

void read_modernbert_config(const HfConfig& cfg, ModelConfig& c) {
  c.arch = "modernbert";
  read_encoder_sizes(cfg, c);
  c.norm_eps = static_cast<float>(cfg.get_float("norm_eps", 1e-5));
  c.rope_layout = kernels::RopeLayout::neox;
  const std::string act = cfg.get_string("hidden_activation", "gelu");
  if (act != "gelu" && act != "silu") {
    cfg.fail(Errc::unsupported, "hidden_activation '" + act + "' is not supported; supported: gelu, silu");
  }
  c.glu_silu = act == "silu";

  // Which layers are local: transformers 5's layer_types, or the older
  // global_attn_every_n_layers (layer i global when i % n == 0).
  c.local_layers.assign(static_cast<size_t>(std::max<int64_t>(c.n_layer, 0)), 0);
  if (cfg.has("layer_types") && !cfg.json()["layer_types"].is_null()) {
    const nlohmann::json& types = cfg.json()["layer_types"];
    if (!types.is_array() || static_cast<int64_t>(types.size()) != c.n_layer) {
      cfg.fail(Errc::bad_format, "layer_types must name each of the num_hidden_layers layers");
    }
    for (size_t i = 0; i < types.size(); ++i) {
      const std::string t = types[i].is_string() ? types[i].get<std::string>() : "";
      if (t != "sliding_attention" && t != "full_attention") {
        cfg.fail(Errc::unsupported, "layer type '" + t + "' is not one of sliding_attention, full_attention");
      }
      c.local_layers[i] = t == "sliding_attention";
    }
  } else {
    const int64_t every = cfg.get_int("global_attn_every_n_layers", 3);
    if (every <= 0) cfg.fail(Errc::bad_format, "global_attn_every_n_layers must be positive");
    for (int64_t il = 0; il < c.n_layer; ++il) c.local_layers[static_cast<size_t>(il)] = il % every != 0;
  }
  // A local layer's token sees local_attention / 2 positions either side:
  // |i - j| < half + 1, the attention kernel's window.
  const int64_t local = cfg.get_int("local_attention", 128);
  if (local < 2 || local > INT32_MAX - 2) cfg.fail(Errc::bad_format, "local_attention must be at least 2");
  c.sliding_window = static_cast<int32_t>(local / 2 + 1);

  // RoPE: one base per layer kind (rope_parameters by layer type, or the
  // older global_rope_theta and local_rope_theta).
  const nlohmann::json& params = cfg.has("rope_parameters") ? cfg.json()["rope_parameters"] : nlohmann::json();
  if (params.is_object() && params.contains("full_attention")) {
    read_layer_kind_rope(cfg, c, std::nullopt);
  } else {
    if (cfg.has("rope_scaling") && !cfg.json()["rope_scaling"].is_null()) {
      cfg.fail(Errc::unsupported, "rope_scaling on ModernBERT is not supported");
    }
    c.rope_theta = static_cast<float>(cfg.get_float("global_rope_theta", 160000.0));
    c.rope_local_theta = static_cast<float>(cfg.get_float("local_rope_theta", 10000.0));
    c.n_rot = c.head_dim;
    if (!(c.rope_theta > 0.0f) || !(c.rope_local_theta > 0.0f)) {
      cfg.fail(Errc::bad_format, "the RoPE bases must be positive");
    }
  }
  check_config(cfg, c);
}

// A LayerNorm's weight, and its bias where norm_bias says there is one.
void layer_norm(HfWeights& src, const std::string& name, bool bias, int64_t n, const float*& w, const float*& b) {
  w = src.vector(name + ".weight", n);
  b = bias ? src.vector(name + ".bias", n) : nullptr;
}

void load_modernbert(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  read_modernbert_config(cfg, c);
  const int64_t e = c.n_embd;
  const bool norm_bias = cfg.get_bool("norm_bias", false);
  const bool attn_bias = cfg.get_bool("attention_bias", false);
  // No released checkpoint has MLP biases (ModernBERT's default).
  if (cfg.get_bool("mlp_bias", false)) cfg.fail(Errc::unsupported, "mlp_bias true is not supported");
  // sentence-transformers saves ModernBertModel's tensors bare; the task
  // classes nest them under "model.".
  const std::string p = src.has("model.embeddings.tok_embeddings.weight") ? "model." : "";
  w.tok_embd = src.matrix(p + "embeddings.tok_embeddings.weight", e, c.n_vocab);
  layer_norm(src, p + "embeddings.norm", norm_bias, e, w.embd_norm, w.embd_norm_b);
  w.layers.assign(static_cast<size_t>(c.n_layer), LayerWeights{});
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string b = p + "layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    // The first layer's attention reads the normed embeddings as they are.
    if (il > 0) layer_norm(src, b + "attn_norm", norm_bias, e, l.attn_norm, l.attn_norm_b);
    const Weight qkv = src.matrix(b + "attn.Wqkv.weight", e, 3 * e);  // rows: q, then k, then v
    l.wq = weight_rows(qkv, 0, e);
    l.wk = weight_rows(qkv, e, e);
    l.wv = weight_rows(qkv, 2 * e, e);
    if (attn_bias) {
      const float* bqkv = src.vector(b + "attn.Wqkv.bias", 3 * e);
      l.bq = bqkv;
      l.bk = bqkv + e;
      l.bv = bqkv + 2 * e;
    }
    l.wo = src.matrix(b + "attn.Wo.weight", e, e);
    l.bo = attn_bias ? src.vector(b + "attn.Wo.bias", e) : nullptr;
    layer_norm(src, b + "mlp_norm", norm_bias, e, l.ffn_norm, l.ffn_norm_b);
    const Weight wi = src.matrix(b + "mlp.Wi.weight", e, 2 * c.n_ff);  // rows: the GELU's input, then the gate
    l.w_gate = weight_rows(wi, 0, c.n_ff);
    l.w_up = weight_rows(wi, c.n_ff, c.n_ff);
    l.w_down = src.matrix(b + "mlp.Wo.weight", c.n_ff, e);
  }
  layer_norm(src, p + "final_norm", norm_bias, e, w.output_norm, w.output_norm_b);

  if (!names_sequence_classifier(cfg)) return;
  // The [CLS] row, or the mean of every row (ModernBERT-base's own
  // config says mean, and its fine-tunes keep it).
  const std::string pooling = cfg.get_string("classifier_pooling", "cls");
  if (pooling != "cls" && pooling != "mean") {
    cfg.fail(Errc::unsupported, "classifier_pooling '" + pooling + "' is not supported; supported: cls, mean");
  }
  c.cls_pool_mean = pooling == "mean";
  check_gelu(cfg, "classifier_activation");
  read_hf_labels(cfg, c);
  c.cls_act = ModelConfig::ClassifierAct::gelu_norm;
  w.cls_dense = src.matrix("head.dense.weight", e, e);
  w.cls_dense_b = cfg.get_bool("classifier_bias", false) ? src.vector("head.dense.bias", e) : nullptr;
  layer_norm(src, "head.norm", norm_bias, e, w.cls_norm, w.cls_norm_b);
  w.cls_out = src.matrix("classifier.weight", e, c.n_labels);
  w.cls_out_b = src.vector("classifier.bias", c.n_labels);
}

}  // namespace

const Architecture arch::modernbert{.name = "modernbert",
                                    .hf_class = "ModernBertModel",
                                    .hf_class_also = "ModernBertForSequenceClassification",
                                    .load_hf = load_modernbert,
                                    .embed = layers::embed_encoder_tokens,
                                    .layer = layers::pre_norm_glu_encoder_block,
                                    .output_norm = layers::output_layer_norm};

}  // namespace troupe
