// BERT (BertModel): the encoder behind most sentence-transformers models
// (all-MiniLM, bge, e5, gte, mxbai-embed). Learned absolute positions plus
// a token-type row, a LayerNorm over the embeddings, then post-LN blocks
// (x = LayerNorm(x + attention(x)), x = LayerNorm(x + mlp(x))) with biases
// everywhere and bidirectional attention. No final norm: the last block's
// output is the hidden state an embedding pools.
//
// RoBERTa and XLM-RoBERTa are the same network with positions counted from
// pad_token_id + 1; DistilBERT (DistilBertModel: msmarco-distilbert,
// multi-qa-distilbert, and the classifiers fine-tuned from distilbert-base)
// the same without a token-type table, under other names. The *ForSequenceClassification classes (cross-encoder
// rerankers: ms-marco-MiniLM, bge-reranker) add a head over the [CLS] row:
// dense + tanh (BERT's pooler, RoBERTa's classifier.dense), then a
// projection to the labels. DistilBERT's head is pre_classifier + ReLU, then
// the classifier.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"
#include "model/model_loaders.hpp"
#include "model/sequence_classifier.hpp"

namespace troupe {
namespace {

void read_bert_config(const HfConfig& cfg, ModelConfig& c, std::string_view arch) {
  c.arch = std::string(arch);
  read_encoder_sizes(cfg, c);
  c.norm_eps = static_cast<float>(cfg.get_float("layer_norm_eps", 1e-12));
  c.n_rot = 0;  // positions are learned, not rotated
  // transformers' "gelu" is the erf form; "gelu_new" and "gelu_pytorch_tanh"
  // the tanh approximation.
  const std::string act = cfg.get_string("hidden_act", "gelu");
  if (act == "gelu") {
    c.gelu_erf = true;
  } else if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
    cfg.fail(Errc::unsupported,
             "hidden_act '" + act + "' is not supported; supported: gelu, gelu_new, gelu_pytorch_tanh");
  }
  const std::string positions = cfg.get_string("position_embedding_type", "absolute");
  if (positions != "absolute") {
    cfg.fail(Errc::unsupported, "position_embedding_type '" + positions + "' is not supported; supported: absolute");
  }
  if (cfg.get_bool("is_decoder", false)) {
    cfg.fail(Errc::unsupported, "is_decoder true (a causal BERT) is not supported; Troupe runs BERT as an encoder");
  }
  c.n_token_types = static_cast<int32_t>(cfg.get_int("type_vocab_size", 2));
  if (c.n_token_types < 1) cfg.fail(Errc::bad_format, "type_vocab_size must be at least 1");
  check_config(cfg, c);
}

// Where a post-LN encoder layer's tensors are, each a .weight and a .bias
// under "<p><layers><il>.": BERT's names and DistilBERT's.
struct LayerNames {
  const char* layers;
  const char* q;
  const char* k;
  const char* v;
  const char* o;
  const char* attn_norm;
  const char* up;
  const char* down;
  const char* ffn_norm;
};
constexpr LayerNames kBertLayers{"encoder.layer.",       "attention.self.query",   "attention.self.key",
                                 "attention.self.value", "attention.output.dense", "attention.output.LayerNorm",
                                 "intermediate.dense",   "output.dense",           "output.LayerNorm"};
constexpr LayerNames kDistilBertLayers{"transformer.layer.", "attention.q_lin",   "attention.k_lin",
                                       "attention.v_lin",    "attention.out_lin", "sa_layer_norm",
                                       "ffn.lin1",           "ffn.lin2",          "output_layer_norm"};

void load_layers(HfWeights& src, const std::string& p, const LayerNames& n, const ModelConfig& c, ModelWeights& w) {
  const int64_t e = c.n_embd;
  w.layers.assign(static_cast<size_t>(c.n_layer), LayerWeights{});
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string b = p + n.layers + std::to_string(il) + ".";
    auto weight = [&](const char* name, int64_t n_in, int64_t n_out) {
      return src.matrix(b + name + ".weight", n_in, n_out);
    };
    auto bias = [&](const char* name, int64_t size) { return src.vector(b + name + ".bias", size); };
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.wq = weight(n.q, e, e);
    l.bq = bias(n.q, e);
    l.wk = weight(n.k, e, e);
    l.bk = bias(n.k, e);
    l.wv = weight(n.v, e, e);
    l.bv = bias(n.v, e);
    l.wo = weight(n.o, e, e);
    l.bo = bias(n.o, e);
    l.attn_norm = src.vector(b + n.attn_norm + ".weight", e);
    l.attn_norm_b = bias(n.attn_norm, e);
    l.w_up = weight(n.up, e, c.n_ff);
    l.b_up = bias(n.up, c.n_ff);
    l.w_down = weight(n.down, c.n_ff, e);
    l.b_down = bias(n.down, e);
    l.ffn_norm = src.vector(b + n.ffn_norm + ".weight", e);
    l.ffn_norm_b = bias(n.ffn_norm, e);
  }
}

// The encoder's tensors under `p` ("", "bert.", "roberta.", "distilbert."),
// its layers' as `names` says; positions start pos_offset rows into the
// table; a token-type table where the config has token types.
void load_encoder(const HfConfig& cfg, HfWeights& src, const std::string& p, int64_t pos_offset,
                  const LayerNames& names, ModelConfig& c, ModelWeights& w) {
  const int64_t e = c.n_embd;
  w.tok_embd = src.matrix(p + "embeddings.word_embeddings.weight", e, c.n_vocab);
  w.pos_embd = src.matrix(p + "embeddings.position_embeddings.weight", e, c.n_ctx_train);
  if (pos_offset > 0) {
    if (pos_offset >= c.n_ctx_train) cfg.fail(Errc::bad_format, "pad_token_id leaves no position embeddings");
    w.pos_embd.data = static_cast<const char*>(w.pos_embd.data) + pos_offset * row_bytes(w.pos_embd.type, e);
    w.pos_embd.n_out -= pos_offset;
    c.n_ctx_train -= pos_offset;
  }
  if (c.n_token_types > 0) {
    w.type_embd = src.vector_rows(p + "embeddings.token_type_embeddings.weight", c.n_token_types, e);
  }
  w.embd_norm = src.vector(p + "embeddings.LayerNorm.weight", e);
  w.embd_norm_b = src.vector(p + "embeddings.LayerNorm.bias", e);
  load_layers(src, p, names, c, w);
}

// The classifier's dense (+ tanh) and its projection to the labels.
void load_head(HfWeights& src, const std::string& dense, const std::string& out, ModelConfig& c, ModelWeights& w) {
  const int64_t e = c.n_embd;
  w.cls_dense = src.matrix(dense + ".weight", e, e);
  w.cls_dense_b = src.vector(dense + ".bias", e);
  w.cls_out = src.matrix(out + ".weight", e, c.n_labels);
  w.cls_out_b = src.vector(out + ".bias", c.n_labels);
}

void load_bert(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  read_bert_config(cfg, c, "bert");
  // sentence-transformers saves BertModel's tensors bare ("embeddings.",
  // "encoder."); checkpoints of the task classes nest them under "bert.".
  const std::string p = src.has("bert.embeddings.word_embeddings.weight") ? "bert." : "";
  load_encoder(cfg, src, p, 0, kBertLayers, c, w);
  if (names_sequence_classifier(cfg)) {
    read_hf_labels(cfg, c);
    load_head(src, "bert.pooler.dense", "classifier", c, w);
  }
}

// RoBERTa counts positions from padding_idx + 1 (its position ids are the
// running count of non-pad tokens, offset by pad_token_id); Troupe never
// pads, so the table is read from that row on.
void load_roberta(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w, std::string_view arch) {
  read_bert_config(cfg, c, arch);
  const int64_t pad = cfg.get_int("pad_token_id", 1);
  if (pad < 0) cfg.fail(Errc::bad_format, "pad_token_id must not be negative");
  const std::string p = src.has("roberta.embeddings.word_embeddings.weight") ? "roberta." : "";
  load_encoder(cfg, src, p, pad + 1, kBertLayers, c, w);
  if (names_sequence_classifier(cfg)) {
    read_hf_labels(cfg, c);
    load_head(src, "classifier.dense", "classifier.out_proj", c, w);
  }
}

void load_roberta_hf(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  load_roberta(cfg, src, c, w, "roberta");
}

void load_xlm_roberta_hf(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  load_roberta(cfg, src, c, w, "xlm-roberta");
}

// DistilBertConfig's names: dim, n_layers, n_heads, hidden_dim; LayerNorms
// of 1e-12 always; "activation" gelu (erf) is the only one its checkpoints use.
void read_distilbert_config(const HfConfig& cfg, ModelConfig& c) {
  c.arch = "distilbert";
  c.causal = false;
  c.tied_output = false;
  c.n_vocab = cfg.get_int("vocab_size");
  c.n_embd = cfg.get_int("dim");
  c.n_layer = cfg.get_int("n_layers");
  c.n_head = cfg.get_int("n_heads");
  c.n_head_kv = c.n_head;
  if (c.n_head <= 0 || c.n_embd % c.n_head != 0) cfg.fail(Errc::bad_format, "dim is not a multiple of n_heads");
  c.head_dim = c.n_embd / c.n_head;
  c.n_ff = cfg.get_int("hidden_dim");
  c.n_ctx_train = cfg.get_int("max_position_embeddings");
  if (c.n_ctx_train <= 0) cfg.fail(Errc::bad_format, "max_position_embeddings must be positive");
  c.norm_eps = 1e-12f;
  c.n_rot = 0;
  c.n_token_types = 0;
  const std::string act = cfg.get_string("activation", "gelu");
  if (act != "gelu") cfg.fail(Errc::unsupported, "activation '" + act + "' is not supported; supported: gelu");
  c.gelu_erf = true;
  check_config(cfg, c);
}

// Sinusoidal position tables (sinusoidal_pos_embds) are saved as weights
// like learned ones, so both read the same.
void load_distilbert(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  read_distilbert_config(cfg, c);
  const std::string p = src.has("distilbert.embeddings.word_embeddings.weight") ? "distilbert." : "";
  load_encoder(cfg, src, p, 0, kDistilBertLayers, c, w);
  if (names_sequence_classifier(cfg)) {
    read_hf_labels(cfg, c);
    load_head(src, "pre_classifier", "classifier", c, w);
    c.cls_act = ModelConfig::ClassifierAct::relu;
  }
}

void bert_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::post_layer_norm_attention_block(ctx, il, kv, x);
  layers::post_layer_norm_gelu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::bert{.name = "bert",
                              .hf_class = "BertModel",
                              .hf_class_also = "BertForSequenceClassification",
                              .load_hf = load_bert,
                              .embed = layers::embed_encoder_tokens,
                              .layer = bert_layer,
                              .output_norm = layers::no_output_norm};

const Architecture arch::roberta{.name = "roberta",
                                 .hf_class = "RobertaModel",
                                 .hf_class_also = "RobertaForSequenceClassification",
                                 .load_hf = load_roberta_hf,
                                 .embed = layers::embed_encoder_tokens,
                                 .layer = bert_layer,
                                 .output_norm = layers::no_output_norm};

const Architecture arch::distilbert{.name = "distilbert",
                                    .hf_class = "DistilBertModel",
                                    .hf_class_also = "DistilBertForSequenceClassification",
                                    .load_hf = load_distilbert,
                                    .embed = layers::embed_encoder_tokens,
                                    .layer = bert_layer,
                                    .output_norm = layers::no_output_norm};

const Architecture arch::xlm_roberta{.name = "xlm-roberta",
                                     .hf_class = "XLMRobertaModel",
                                     .hf_class_also = "XLMRobertaForSequenceClassification",
                                     .load_hf = load_xlm_roberta_hf,
                                     .embed = layers::embed_encoder_tokens,
                                     .layer = bert_layer,
                                     .output_norm = layers::no_output_norm};

}  // namespace troupe
