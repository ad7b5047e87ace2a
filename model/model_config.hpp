// Model hyperparameters, read once from a model file and passed in; nothing
// below reads the file or the environment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu_kernels.hpp"
#include "model/pooling.hpp"

namespace troupe {

struct ModelConfig {
  std::string arch = "llama";
  std::string name;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;          // FFN hidden width (of each expert in a mixture of experts)
  int64_t n_ctx_train = 0;
  float norm_eps = 1e-5f;
  kernels::RopeLayout rope_layout = kernels::RopeLayout::normal;
  int64_t n_rot = 0;  // rotated dims per head
  float rope_theta = 10000.0f;
  float rope_freq_scale = 1.0f;
  std::vector<float> rope_freq_factors;  // [n_rot / 2] or empty
  // LongRoPE (Phi-3.5, Phi-4-mini): two factor lists, the short one for
  // contexts up to rope_orig_ctx and the long one beyond. rope_freq_factors
  // holds the one chosen at load for the context the engine will run
  // (select_longrope), so cached keys never mix the two. rope_mscale
  // multiplies the rotated dims of q and k (its square scales the scores).
  std::vector<float> rope_short_factors;  // [n_rot / 2] or empty (no LongRoPE)
  std::vector<float> rope_long_factors;   // [n_rot / 2] or empty
  int64_t rope_orig_ctx = 0;
  float rope_mscale = 1.0f;
  int32_t sliding_window = 0;            // 0: full causal attention
  // false: an encoder (BERT). Every token attends to the whole sequence, so
  // a prompt is computed in one step, never in chunks nor from a cached
  // prefix, and nothing is generated after it.
  bool causal = true;
  // The dense FFN's GELU: x Phi(x) (BERT's "gelu") or the tanh approximation
  // (GPT-2's "gelu_new").
  bool gelu_erf = false;
  bool gelu_quick = false;  // CLIP's x sigmoid(1.702 x) in gelu_ffn (its vision towers); wins over gelu_erf
  // ModernBERT's gated MLP: SiLU on the gate (SwiGLU: IBM's Granite
  // Embedding R2) in place of the exact GELU (GeGLU).
  bool glu_silu = false;
  // Rows of the token-type table an encoder adds to its embeddings (BERT:
  // 2, its two segments; RoBERTa: 1; 0: none).
  int32_t n_token_types = 0;
  // A cross-encoder's classifier (*ForSequenceClassification): the scores
  // its head computes from the [CLS] row, which the last stage returns in
  // place of hidden rows; 0: no classifier.
  int32_t n_labels = 0;
  // The classifier's label names ([n_labels]: id2label, GGUF's
  // classifier.output_labels; LABEL_<i> where the file names none), and
  // whether its labels are independent (problem_type
  // multi_label_classification: a sigmoid each, not a softmax over them).
  std::vector<std::string> labels;
  bool multi_label = false;
  // What follows the head's dense: tanh (BERT's pooler, RoBERTa's
  // classifier), the exact GELU and a LayerNorm (ModernBERT's), or ReLU
  // (DistilBERT's pre_classifier).
  enum class ClassifierAct : uint8_t { tanh, gelu_norm, relu };
  ClassifierAct cls_act = ClassifierAct::tanh;
  // The head reads the mean of a text's final-normed rows, not its [CLS]
  // row (ModernBERT's classifier_pooling "mean"): the last stage needs the
  // whole prompt in one step, as an encoder's always is.
  bool cls_pool_mean = false;
  // A causal reranker's prompt for a (query, document) pair, {query} and
  // {document} standing for the texts (Qwen3-Reranker's; a GGUF's
  // tokenizer.chat_template.rerank); empty: the tokenizer's pair template.
  std::string rerank_template;
  bool tied_output = false;              // output projection is the token embedding
  // What an embedding model declares (pooling none: a model that generates).
  EmbeddingSpec embedding;
  int64_t n_expert = 0;                  // mixture-of-experts FFN: experts per layer (0: dense FFN)
  int64_t n_expert_used = 0;             // experts each token is routed to (top-k)
  int64_t n_ff_shared = 0;               // Qwen2-MoE's shared expert width (0: none)
  // The top-k gate weights: true, a softmax over the chosen experts' logits
  // (Mixtral; Qwen3-MoE's norm_topk_prob); false, the chosen experts' shares
  // of a softmax over all experts.
  bool expert_weights_norm = true;
  // How tokens choose experts. topk_softmax (Mixtral, Qwen, gpt-oss): the
  // top k router logits, weighted as expert_weights_norm says. The DeepSeek
  // routers score every expert (V2: a softmax; V3 and GLM-4.5: a sigmoid),
  // choose the top k by score plus the layer's expert_score_bias among the
  // experts of the best n_expert_groups_used of n_expert_groups equal groups
  // (a group is worth its best score under the softmax, its two best biased
  // scores under the sigmoid), and weight them by their own scores,
  // renormalized when expert_weights_norm, times expert_weights_scale.
  enum class ExpertRouter { topk_softmax, deepseek_softmax, deepseek_sigmoid };
  ExpertRouter expert_router = ExpertRouter::topk_softmax;
  float expert_weights_scale = 1.0f;
  // Added to the chosen weights' sum before they are renormalized
  // (DeepSeek-V3: 1e-20; LFM2-MoE: 1e-6).
  float expert_weights_norm_eps = 1e-20f;
  int64_t n_expert_groups = 1;
  int64_t n_expert_groups_used = 1;
  // The dense layers' FFN width in a model that puts dense layers before its
  // MoE ones (GLM-4.5's first_k_dense_replace); 0: none.
  int64_t n_ff_dense = 0;
  // gpt-oss's experts: (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha g),
  // g = min(gate, limit), in place of silu(gate) * up. 0: plain SwiGLU.
  float expert_swiglu_limit = 0.0f;
  float expert_swiglu_alpha = 1.0f;
  // Gemma 3 interleaves local layers (a sliding_window, their own RoPE base,
  // unscaled) with global ones (full attention, rope_theta and its scaling).
  // Empty: every layer is alike, and sliding_window applies to all.
  std::vector<uint8_t> local_layers;  // [n_layer], 1: local
  // gpt-oss's local layers rope as its global ones do (rope_theta, YaRN).
  bool local_layers_share_rope = false;
  // SmolLM3 leaves RoPE out of some layers (NoPE): [n_layer], 1: no RoPE.
  // Empty: every layer ropes.
  std::vector<uint8_t> nope_layers;
  // DeepSeek's multi-head latent attention (mla_kv_rank > 0): keys and values
  // come from a latent of mla_kv_rank per token (plus mla_rope_dim roped
  // dims shared by every head); queries from a latent of mla_q_rank (0: x).
  // Each head's query and key are mla_nope_dim + mla_rope_dim = head_dim,
  // its value mla_v_dim <= head_dim; n_head_kv = n_head.
  int64_t mla_q_rank = 0;
  int64_t mla_kv_rank = 0;
  int64_t mla_nope_dim = 0;
  int64_t mla_rope_dim = 0;
  int64_t mla_v_dim = 0;
  // LFM2's short-convolution layers ([n_layer], 1: conv; empty: none): in
  // place of attention, a gated depthwise causal convolution of conv_kernel
  // taps. Its paged cache rows hold each position's convolution input (b*x,
  // n_embd values) in place of keys and values (ModelConfig::kv_layer_shape).
  std::vector<uint8_t> conv_layers;
  int64_t conv_kernel = 0;
  // Gated DeltaNet layers (Qwen3-Next, Qwen3.5; [n_layer], 1: recurrent;
  // empty: none): linear attention whose memory of the past is a fixed
  // per-sequence state, not cached rows: the last conv_kernel - 1 inputs of
  // a causal depthwise conv over q, k and v (conv_dim values each), and a
  // [v_head_dim, k_head_dim] matrix per value head. Such a layer has no KV
  // pages; its state lives in the stage's state slots (kv_layer_shape,
  // recurrent_state_floats), one per running sequence.
  std::vector<uint8_t> recurrent_layers;
  int64_t gdn_k_heads = 0;    // query/key heads (linear_num_key_heads)
  int64_t gdn_v_heads = 0;    // value heads, a multiple of gdn_k_heads
  int64_t gdn_k_dim = 0;      // key head width
  int64_t gdn_v_dim = 0;      // value head width
  // Which key head value head h reads: h / (gdn_v_heads / gdn_k_heads) (the
  // checkpoints' grouped order) or, tiled, h % gdn_k_heads (llama.cpp's
  // converter reorders Qwen3.5's value heads so).
  bool gdn_v_tiled = false;
  // What the recurrent layers are: Qwen3-Next / Qwen3.5's Gated DeltaNet
  // (the gdn_* sizes) or Mamba-2 (Granite 4.0-H; the ssm_* sizes).
  enum class RecurrentKind { gated_delta, mamba2 };
  RecurrentKind recurrent_kind = RecurrentKind::gated_delta;
  int64_t ssm_heads = 0;     // Mamba-2 heads (mamba_n_heads)
  int64_t ssm_head_dim = 0;  // their width (mamba_d_head)
  int64_t ssm_state = 0;     // state per head dim (mamba_d_state)
  int64_t ssm_groups = 0;    // groups of B and C (mamba_n_groups)
  // Qwen3-Next's full-attention layers gate their output per element:
  // q_proj gives each head's query and gate, and attention * sigmoid(gate)
  // goes into o_proj (LayerWeights::wq_gate).
  bool attn_output_gate = false;
  // OLMo 2 normalizes each token's whole q and k projections ([q_dim],
  // [kv_dim] weights); others with q/k norms normalize each head.
  bool qk_norm_whole = false;
  // Hunyuan normalizes each query and key head after RoPE, not before.
  bool qk_norm_after_rope = false;
  float rope_local_theta = 10000.0f;
  float attn_scale = 0.0f;   // scale of QK^T; 0: 1/sqrt(head_dim)
  // Llama 4's attention temperature (Ministral 3's llama_4_scaling_beta):
  // each query times 1 + beta ln(1 + floor(pos / attn_temp_floor)), so 1
  // within the first attn_temp_floor positions. beta 0: off.
  float attn_temp_beta = 0.0f;
  int64_t attn_temp_floor = 0;
  float embed_scale = 1.0f;  // token embeddings are multiplied by it (Gemma: sqrt(n_embd); Granite)
  float residual_scale = 1.0f;  // each block's output is multiplied by it before the residual add (Granite)
  float logit_scale = 1.0f;     // the logits are divided by it (Granite)
  // Gemma 2's soft-capping: c * tanh(x / c) of the attention scores and of
  // the logits; 0: off.
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;

  bool ropes(int64_t il) const { return nope_layers.empty() || nope_layers[static_cast<size_t>(il)] == 0; }
  bool is_local(int64_t il) const { return !local_layers.empty() && local_layers[static_cast<size_t>(il)] != 0; }
  int32_t window(int64_t il) const { return local_layers.empty() || is_local(il) ? sliding_window : 0; }

  bool is_conv(int64_t il) const { return !conv_layers.empty() && conv_layers[static_cast<size_t>(il)] != 0; }
  bool is_recurrent(int64_t il) const {
    return !recurrent_layers.empty() && recurrent_layers[static_cast<size_t>(il)] != 0;
  }
  bool has_recurrent_layers() const {
    for (uint8_t r : recurrent_layers) {
      if (r != 0) return true;
    }
    return false;
  }
  int64_t gdn_key_dim() const { return gdn_k_heads * gdn_k_dim; }
  int64_t gdn_value_dim() const { return gdn_v_heads * gdn_v_dim; }
  int64_t gdn_conv_dim() const { return 2 * gdn_key_dim() + gdn_value_dim(); }
  // Floats of one sequence's state in a recurrent layer: the conv history
  // [conv_kernel - 1, conv_dim], then [gdn_v_heads, gdn_v_dim, gdn_k_dim]
  // (Mamba-2: Mamba2Shape::state_floats).
  kernels::Mamba2Shape mamba2_shape() const {
    return {.n_heads = ssm_heads, .head_dim = ssm_head_dim, .d_state = ssm_state, .n_groups = ssm_groups,
            .taps = conv_kernel};
  }
  int64_t recurrent_state_floats() const {
    if (recurrent_kind == RecurrentKind::mamba2) return mamba2_shape().state_floats();
    return (conv_kernel - 1) * gdn_conv_dim() + gdn_v_heads * gdn_v_dim * gdn_k_dim;
  }

  // What layer il keeps per cached token: n_rows rows of row_dim values, in
  // K and V (has_v) or K alone (a conv layer's one row of n_embd); nothing
  // for a recurrent layer.
  struct KvLayerShape {
    int64_t n_rows = 0;
    int64_t row_dim = 0;
    bool has_v = true;
  };
  KvLayerShape kv_layer_shape(int64_t il) const {
    if (is_conv(il)) return {.n_rows = 1, .row_dim = n_embd, .has_v = false};
    if (is_recurrent(il)) return {.n_rows = 0, .row_dim = 0, .has_v = false};
    return {.n_rows = n_head_kv, .row_dim = head_dim, .has_v = true};
  }

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

}  // namespace troupe
