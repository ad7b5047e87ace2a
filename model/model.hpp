// A loaded model: hyperparameters, host weights (used in place from the
// memory-mapped file: the persistent weight pool, or converted copies the
// model owns), and the tokenizer data the file carries. Immutable once
// loaded, so stages and actors share it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "model/lora.hpp"
#include "model/model_config.hpp"
#include "model/quant_scheme.hpp"
#include "model/weight_store.hpp"
#include "tokenizer/vocab.hpp"

namespace troupe {

// One expert of a mixture-of-experts FFN (a SwiGLU FFN of its own).
struct ExpertWeights {
  Weight w_gate;  // [n_ff, n_embd]
  Weight w_up;    // [n_ff, n_embd]
  Weight w_down;  // [n_embd, n_ff]
  const float* b_gate = nullptr;  // [n_ff] (gpt-oss)
  const float* b_up = nullptr;    // [n_ff]
  const float* b_down = nullptr;  // [n_embd]
};

struct LayerWeights {
  const float* attn_norm = nullptr;  // [n_embd]
  const float* attn_norm_b = nullptr;  // [n_embd] (LayerNorm models)
  Weight wq;                         // [q_dim, n_embd]
  Weight wk;                         // [kv_dim, n_embd]
  Weight wv;                         // [kv_dim, n_embd]
  Weight wo;                         // [n_embd, q_dim] (a conv layer's out_proj: [n_embd, n_embd])
  const float* bq = nullptr;         // [q_dim] (Qwen2 QKV bias)
  const float* bk = nullptr;         // [kv_dim]
  const float* bv = nullptr;         // [kv_dim]
  const float* bo = nullptr;         // [n_embd] (GPT-2)
  // DeepSeek's latent attention (ModelConfig::mla_kv_rank > 0); wq is then
  // q_b_proj [n_head head_dim, mla_q_rank] (or q_proj), wk and wv empty.
  Weight wq_a;                       // [mla_q_rank, n_embd]
  const float* q_a_norm = nullptr;   // [mla_q_rank]
  Weight wkv_a;                      // [mla_kv_rank + mla_rope_dim, n_embd]
  const float* kv_a_norm = nullptr;  // [mla_kv_rank]
  Weight wkv_b;                      // [n_head (mla_nope_dim + mla_v_dim), mla_kv_rank]
  // LFM2's short convolution (ModelConfig::is_conv): in_proj gives B, C and
  // x per token; conv_w holds each channel's conv_kernel taps, oldest first.
  Weight conv_in;                     // [3 n_embd, n_embd]
  const float* conv_in_b = nullptr;   // [3 n_embd]
  const float* conv_w = nullptr;      // [n_embd, conv_kernel]
  const float* conv_b = nullptr;      // [n_embd]
  // A Gated DeltaNet layer (ModelConfig::is_recurrent: Qwen3-Next, Qwen3.5);
  // wo is its out_proj [n_embd, value_dim].
  Weight gdn_qkv;                       // [conv_dim, n_embd]: q, k, v of every head
  Weight gdn_z;                         // [value_dim, n_embd]: the output gate
  Weight gdn_b;                         // [n_v_heads, n_embd]: beta's logits
  Weight gdn_a;                         // [n_v_heads, n_embd]: the decay's input
  const float* gdn_conv = nullptr;      // [conv_dim, conv_kernel] taps, oldest first
  const float* gdn_decay = nullptr;     // [n_v_heads] -exp(A_log)
  const float* gdn_dt_bias = nullptr;   // [n_v_heads]
  const float* gdn_norm = nullptr;      // [v_head_dim] RMSNorm of each head's output
  // A Mamba-2 layer (ModelConfig::RecurrentKind::mamba2: Granite 4.0-H);
  // wo is its out_proj [n_embd, inner].
  Weight ssm_in;                        // [inner + conv_dim + n_heads, n_embd]: z, x B C, dt
  const float* ssm_conv = nullptr;      // [conv_dim, conv_kernel] taps, oldest first
  const float* ssm_conv_b = nullptr;    // [conv_dim]
  const float* ssm_a = nullptr;         // [n_heads] -exp(A_log)
  const float* ssm_dt_bias = nullptr;   // [n_heads]
  const float* ssm_d = nullptr;         // [n_heads]
  const float* ssm_norm = nullptr;      // [inner]
  // Gated attention (ModelConfig::attn_output_gate): the gate rows of q_proj.
  Weight wq_gate;                       // [q_dim, n_embd]
  const float* q_norm = nullptr;     // [head_dim] per-head RMSNorm of queries (Qwen3)
  const float* k_norm = nullptr;     // [head_dim] per-head RMSNorm of keys (Qwen3)
  const float* attn_sinks = nullptr; // [n_head] a logit per head in the softmax's denominator (gpt-oss)
  const float* attn_post_norm = nullptr;  // [n_embd] RMSNorm of the attention output (Gemma)
  const float* ffn_norm = nullptr;   // [n_embd]
  const float* ffn_norm_b = nullptr; // [n_embd] (LayerNorm models)
  const float* ffn_post_norm = nullptr;  // [n_embd] RMSNorm of the FFN output (Gemma)
  // Apertus's xIELU activation of its up projection: the effective
  // parameters (after their softplus), host scalars.
  struct Xielu {
    float alpha_p = 0.0f, alpha_n = 0.0f, beta = 0.0f, eps = 0.0f;
  } xielu;
  Weight w_gate;                     // [n_ff, n_embd]
  Weight w_up;                       // [n_ff, n_embd]
  Weight w_down;                     // [n_embd, n_ff]
  const float* b_up = nullptr;       // [n_ff] (GPT-2)
  const float* b_down = nullptr;     // [n_embd] (GPT-2)
  Weight ffn_router;                 // [n_expert, n_embd] (mixture of experts)
  const float* ffn_router_b = nullptr;  // [n_expert] (gpt-oss)
  // [n_expert] added to the scores only to choose the experts (DeepSeek-V3's
  // e_score_correction_bias); host memory, read by the routing on the host.
  const float* expert_score_bias = nullptr;
  std::vector<ExpertWeights> experts;  // [n_expert]; empty for a dense FFN
  // The shared expert, run on every token beside the routed ones: Qwen2-MoE
  // weights it by sigmoid(shared_gate · x), GLM-4.5 (shared_gate empty) by 1;
  // empty (data null) elsewhere.
  ExpertWeights shared;              // [n_ff_shared, n_embd] gate/up, [n_embd, n_ff_shared] down
  Weight shared_gate;                // [1, n_embd]
};

struct ModelWeights {
  Weight tok_embd;                      // [n_vocab, n_embd]
  Weight pos_embd;                      // [n_ctx_train, n_embd] learned positions (GPT-2), else empty
  const float* type_embd = nullptr;     // [n_token_types, n_embd] BERT's segment rows, one added to each token
  const float* embd_norm = nullptr;     // [n_embd] LayerNorm of the embeddings (BERT)
  const float* embd_norm_b = nullptr;   // [n_embd]
  const float* output_norm = nullptr;   // [n_embd]
  const float* output_norm_b = nullptr; // [n_embd] (LayerNorm models)
  Weight output;                        // [n_vocab, n_embd] (== tok_embd when tied)
  // A cross-encoder's head (ModelConfig::n_labels): tanh(cls_dense x + b)
  // (ModernBERT's: LayerNorm(gelu(cls_dense x + b))), then cls_out;
  // cls_dense empty where a GGUF converter dropped it.
  Weight cls_dense;                     // [n_embd, n_embd]
  const float* cls_dense_b = nullptr;   // [n_embd]
  const float* cls_norm = nullptr;      // [n_embd] ModernBERT's head: LayerNorm after dense + GELU
  const float* cls_norm_b = nullptr;    // [n_embd]
  Weight cls_out;                       // [n_labels, n_embd]
  const float* cls_out_b = nullptr;     // [n_labels]
  std::vector<LayerWeights> layers;     // [n_layer]
};

struct ModelLoadOptions {
  // Converts float (f32/f16/bf16) matrices at load: to one type, or to
  // llama.cpp's mix of a file type (model/quant_scheme.hpp). Norms, biases,
  // position tables and MoE routers stay f32; quantized tensors as they are.
  std::optional<QuantScheme> quantize;
  // The longest sequence the engine will run (prompt + output); 0: not
  // known, taken as short. Only LongRoPE models read it: beyond their
  // original context they use the long factors (as llama.cpp picks by n_ctx).
  int64_t context_length = 0;
  // A causal LM run as a reranker from its LM head's rows of these tokens
  // (vLLM's hf_overrides classifier_from_token): one token, its logit (the
  // score its sigmoid: bge-reranker-v2-gemma's "Yes"); two, the second's
  // against the first's (softmax's second entry, the sigmoid of the
  // difference: ["no", "yes"], mxbai-rerank-v2's ["0", "1"]). Empty: as the
  // files say (a Qwen3-Reranker is known by its README).
  std::vector<std::string> classifier_from_token;
  // Its prompt for a (query, document) pair, {query} and {document} standing
  // for the texts; empty: the model's own (Qwen3-Reranker's, a GGUF's
  // `rerank` template), else the tokenizer's pair template.
  std::string rerank_template;
  // LoRA adapters, applied in order (model/lora.hpp): PEFT directories over
  // a Hugging Face model, llama.cpp adapter GGUFs over a GGUF one.
  std::vector<LoraAdapterSpec> lora;
};

class Model {
 public:
  virtual ~Model() = default;
  // Loads a GGUF file or a Hugging Face model directory (config.json and
  // safetensors weights). Throws Error naming the file and the problem.
  static std::shared_ptr<const Model> load(const std::string& path, const ModelLoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const VocabData& vocab() const { return vocab_; }
  const std::string& chat_template() const { return chat_template_; }
  const std::string& path() const { return path_; }
  // Bytes of weights one decode step reads (for roofline figures).
  int64_t weight_bytes() const { return weight_bytes_; }
  // Bytes the model allocated at load (weights not used in place from the
  // file's mapping).
  int64_t stored_bytes() const { return static_cast<int64_t>(store_.bytes()); }

 protected:
  ModelConfig config_;
  ModelWeights weights_;
  VocabData vocab_;
  std::string chat_template_;
  std::string path_;
  int64_t weight_bytes_ = 0;
  WeightStore store_;  // weights made at load (conversions, transposes, quantized copies)
};

}  // namespace troupe
