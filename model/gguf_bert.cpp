// GGUF "bert" files (llama.cpp's converter of BertModel: bge, all-MiniLM,
// e5 and their kind): the encoder of model/arch_bert.cpp, its tensors under
// llama.cpp's names, its WordPiece vocabulary in llama.cpp's spelling
// (tokenizer/gguf_wordpiece.cpp). A converted BertForSequenceClassification
// (a reranker) also holds `cls.output` and, where the converter kept one,
// `cls`: the head over the [CLS] row that llama.cpp's rank pooling runs.
#include <cstdint>
#include <optional>
#include <string>

#include "model/gguf_model_impl.hpp"
#include "model/gguf_vocab.hpp"
#include "model/pooling.hpp"
#include "model/sequence_classifier.hpp"
#include "model/weight_store.hpp"

namespace troupe::gguf_load {

void GgufModel::read_encoder_sizes(const std::string& p) {
  ModelConfig& c = config_;
  c.causal = false;
  if (file_.find_bool(p + "attention.causal").value_or(false)) fail(p + "attention.causal true: not an encoder");
  c.name = file_.find_string("general.name").value_or("");
  c.n_embd = file_.get_u32(p + "embedding_length");
  c.n_layer = file_.get_u32(p + "block_count");
  c.n_head = file_.get_u32(p + "attention.head_count");
  c.n_head_kv = c.n_head;
  c.n_ff = file_.get_u32(p + "feed_forward_length");
  c.n_ctx_train = file_.get_u32(p + "context_length");
  // ModernBERT's converter writes the LayerNorm's epsilon under the RMS norm's key.
  const std::optional<float> eps = file_.find_f32(p + "attention.layer_norm_epsilon");
  c.norm_eps = eps ? *eps : file_.get_f32(p + "attention.layer_norm_rms_epsilon");
  if (c.n_embd <= 0 || c.n_layer <= 0 || c.n_head <= 0 || c.n_ff <= 0 || c.n_ctx_train <= 0) {
    fail("hyperparameters must be positive");
  }
  if (c.n_embd % c.n_head != 0) fail("embedding_length is not a multiple of head_count");
  c.head_dim = c.n_embd / c.n_head;
}

void GgufModel::finish_encoder(const ModelLoadOptions& options) {
  ModelConfig& c = config_;
  ModelWeights& w = weights_;
  // Both are for causal rerankers: refused here, by name.
  if (!options.classifier_from_token.empty()) {
    bind_token_classifier(options.classifier_from_token, std::vector<int32_t>(options.classifier_from_token.size(), -1),
                          file_.path(), c, w, store_);
  }
  apply_rerank_template(options, file_.path(), c);
  weight_bytes_ = 0;
  for (const gguf::TensorInfo& t : file_.tensors()) {
    if (t.name != "token_embd.weight") weight_bytes_ += t.n_bytes;
  }
  if (options.quantize) {
    quantize_weights(w, c, *options.quantize, store_, file_.path());
    weight_bytes_ = decode_weight_bytes(w, c);
  }
  vocab_ = vocab_from_gguf(file_);
}

std::optional<uint32_t> GgufModel::bind_encoder_embeddings(const std::string& p) {
  ModelConfig& c = config_;
  ModelWeights& w = weights_;
  const std::optional<uint32_t> pooling = file_.find_u32(p + "pooling_type");
  if (pooling && *pooling != kRankPooling) c.embedding.pooling = gguf_pooling(*pooling, file_.path());
  const gguf::TensorInfo& embd = file_.tensor("token_embd.weight");
  if (embd.shape.size() != 2) fail("tensor 'token_embd.weight' must have 2 dimensions");
  c.n_vocab = embd.shape[1];
  const int64_t e = c.n_embd;
  w.tok_embd = matrix("token_embd.weight", e, c.n_vocab);
  // {n_embd, n_types}: BERT's segments (a pair's second text is type 1).
  const gguf::TensorInfo& types = file_.tensor("token_types.weight");
  if (types.shape.size() != 2 || types.shape[0] != e || types.shape[1] < 1) {
    fail("tensor 'token_types.weight' must be {embedding_length, types}");
  }
  if (types.type != DType::f32 && types.type != DType::f16 && types.type != DType::bf16) {
    fail("tensor 'token_types.weight' is " + std::string(dtype_name(types.type)) + ", expected f32, f16 or bf16");
  }
  c.n_token_types = static_cast<int32_t>(types.shape[1]);
  w.type_embd = store_f32(store_, types.type, types.data, e * c.n_token_types);
  w.embd_norm = vector("token_embd_norm.weight", e);
  w.embd_norm_b = vector("token_embd_norm.bias", e);
  return pooling;
}

void GgufModel::bind_bert(const ModelLoadOptions& options) {
  const std::string p = "bert.";
  ModelConfig& c = config_;
  read_encoder_sizes(p);
  c.arch = "bert";
  c.n_rot = 0;
  // The file does not say which GELU: BERT checkpoints' "gelu" is the erf
  // form (llama.cpp computes the tanh one, up to 5e-4 away).
  c.gelu_erf = true;
  // A BERT file without pooling_type is still an encoder: the pipeline pools
  // its CLS token unless told otherwise (pipeline_embedding).
  const std::optional<uint32_t> pooling = bind_encoder_embeddings(p);
  const int64_t e = c.n_embd;
  ModelWeights& w = weights_;
  w.pos_embd = matrix("position_embd.weight", e, c.n_ctx_train);
  w.layers.assign(static_cast<size_t>(c.n_layer), LayerWeights{});
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.wq = matrix(b + "attn_q.weight", e, e);
    l.bq = vector(b + "attn_q.bias", e);
    l.wk = matrix(b + "attn_k.weight", e, e);
    l.bk = vector(b + "attn_k.bias", e);
    l.wv = matrix(b + "attn_v.weight", e, e);
    l.bv = vector(b + "attn_v.bias", e);
    l.wo = matrix(b + "attn_output.weight", e, e);
    l.bo = vector(b + "attn_output.bias", e);
    l.attn_norm = vector(b + "attn_output_norm.weight", e);
    l.attn_norm_b = vector(b + "attn_output_norm.bias", e);
    l.w_up = matrix(b + "ffn_up.weight", e, c.n_ff);
    l.b_up = vector(b + "ffn_up.bias", c.n_ff);
    l.w_down = matrix(b + "ffn_down.weight", c.n_ff, e);
    l.b_down = vector(b + "ffn_down.bias", e);
    l.ffn_norm = vector(b + "layer_output_norm.weight", e);
    l.ffn_norm_b = vector(b + "layer_output_norm.bias", e);
  }

  bind_bert_classifier(pooling.has_value() && *pooling == kRankPooling);
  finish_encoder(options);
  // WordPiece (BERT), byte-level BPE (RoBERTa) or SentencePiece Unigram
  // (XLM-RoBERTa), the last two converted as "bert" with their position
  // table already cut at pad_token_id + 1.
  if (vocab_.model != "bert" && vocab_.model != "gpt2" && vocab_.model != "t5") {
    fail("tokenizer.ggml.model '" + vocab_.model +
         "' for a bert model is not supported; supported: bert (WordPiece), gpt2 (RoBERTa's byte-level BPE), t5 "
         "(XLM-RoBERTa's Unigram)");
  }
}

void GgufModel::bind_bert_classifier(bool rank_pooling) {
  ModelConfig& c = config_;
  ModelWeights& w = weights_;
  const gguf::TensorInfo* out = file_.find_tensor("cls.output.weight");
  if (out == nullptr) {
    if (rank_pooling) fail("pooling_type rank needs a classifier, and the file has no 'cls.output.weight'");
    return;
  }
  c.labels = classifier_labels("bert.", *out);
  c.n_labels = static_cast<int32_t>(c.labels.size());
  w.cls_out = matrix("cls.output.weight", c.n_embd, c.n_labels);
  w.cls_out_b = vector("cls.output.bias", c.n_labels);
  // llama.cpp's converter drops BERT's pooler (RoBERTa's classifier.dense
  // stays, as `cls`): without it the head is the projection alone.
  if (file_.find_tensor("cls.weight") != nullptr) {
    w.cls_dense = matrix("cls.weight", c.n_embd, c.n_embd);
    w.cls_dense_b = vector("cls.bias", c.n_embd);
  }
}

}  // namespace troupe::gguf_load
