// BERT (BertModel): the encoder behind most sentence-transformers models
// (all-MiniLM, bge, e5, gte, mxbai-embed). Learned absolute positions plus
// the token-type-0 row, a LayerNorm over the embeddings, then post-LN blocks
// (x = LayerNorm(x + attention(x)), x = LayerNorm(x + mlp(x))) with biases
// everywhere and bidirectional attention. No final norm and no head: the
// last block's output is the hidden state an embedding pools.
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"
#include "model/model_loaders.hpp"

namespace troupe {
namespace {

void read_config(const HfConfig& cfg, ModelConfig& c) {
  c.arch = "bert";
  c.causal = false;
  c.n_vocab = cfg.get_int("vocab_size");
  c.n_embd = cfg.get_int("hidden_size");
  c.n_layer = cfg.get_int("num_hidden_layers");
  c.n_head = cfg.get_int("num_attention_heads");
  c.n_head_kv = c.n_head;
  if (c.n_head <= 0 || c.n_embd % c.n_head != 0) {
    cfg.fail(Errc::bad_format, "hidden_size is not a multiple of num_attention_heads");
  }
  c.head_dim = c.n_embd / c.n_head;
  c.n_ff = cfg.get_int("intermediate_size");
  c.n_ctx_train = cfg.get_int("max_position_embeddings");
  c.norm_eps = static_cast<float>(cfg.get_float("layer_norm_eps", 1e-12));
  c.n_rot = 0;  // positions are learned, not rotated
  c.tied_output = false;
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
  if (c.n_ctx_train <= 0) cfg.fail(Errc::bad_format, "max_position_embeddings must be positive");
  if (cfg.get_int("type_vocab_size", 2) < 1) cfg.fail(Errc::bad_format, "type_vocab_size must be at least 1");
  check_config(cfg, c);
}

void load(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  read_config(cfg, c);
  // sentence-transformers saves BertModel's tensors bare ("embeddings.",
  // "encoder."); checkpoints of the task classes nest them under "bert.".
  const std::string p = src.has("bert.embeddings.word_embeddings.weight") ? "bert." : "";
  const int64_t e = c.n_embd;
  w.tok_embd = src.matrix(p + "embeddings.word_embeddings.weight", e, c.n_vocab);
  w.pos_embd = src.matrix(p + "embeddings.position_embeddings.weight", e, c.n_ctx_train);
  // Every input is one segment: token type 0, the table's first row.
  w.type_embd = src.vector_rows(p + "embeddings.token_type_embeddings.weight", cfg.get_int("type_vocab_size", 2), e);
  w.embd_norm = src.vector(p + "embeddings.LayerNorm.weight", e);
  w.embd_norm_b = src.vector(p + "embeddings.LayerNorm.bias", e);
  w.layers.assign(static_cast<size_t>(c.n_layer), LayerWeights{});
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string b = p + "encoder.layer." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.wq = src.matrix(b + "attention.self.query.weight", e, e);
    l.bq = src.vector(b + "attention.self.query.bias", e);
    l.wk = src.matrix(b + "attention.self.key.weight", e, e);
    l.bk = src.vector(b + "attention.self.key.bias", e);
    l.wv = src.matrix(b + "attention.self.value.weight", e, e);
    l.bv = src.vector(b + "attention.self.value.bias", e);
    l.wo = src.matrix(b + "attention.output.dense.weight", e, e);
    l.bo = src.vector(b + "attention.output.dense.bias", e);
    l.attn_norm = src.vector(b + "attention.output.LayerNorm.weight", e);
    l.attn_norm_b = src.vector(b + "attention.output.LayerNorm.bias", e);
    l.w_up = src.matrix(b + "intermediate.dense.weight", e, c.n_ff);
    l.b_up = src.vector(b + "intermediate.dense.bias", c.n_ff);
    l.w_down = src.matrix(b + "output.dense.weight", c.n_ff, e);
    l.b_down = src.vector(b + "output.dense.bias", e);
    l.ffn_norm = src.vector(b + "output.LayerNorm.weight", e);
    l.ffn_norm_b = src.vector(b + "output.LayerNorm.bias", e);
  }
}

void layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::post_layer_norm_attention_block(ctx, il, kv, x);
  layers::post_layer_norm_gelu_block(ctx, il, x);
}

// The last block ends in its LayerNorm: the rows are final as they are.
void no_output_norm(const layers::StepContext&, float*, int64_t) {}

}  // namespace

const Architecture arch::bert{.name = "bert",
                              .hf_class = "BertModel",
                              .load_hf = load,
                              .embed = layers::embed_encoder_tokens,
                              .layer = layer,
                              .output_norm = no_output_norm};

}  // namespace troupe
