// Binding a safetensors checkpoint's tensors to ModelWeights: shape checks
// that name the tensor, matrices used in place from the mapping when their
// dtype and alignment allow, and copies (f32 vectors, transposed Conv1D
// matrices) into the model's WeightStore otherwise.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/thread_pool.hpp"
#include "model/hf_config.hpp"
#include "model/hf_quantization.hpp"
#include "model/lora.hpp"
#include "model/model.hpp"
#include "model/safetensors.hpp"
#include "model/weight_store.hpp"

namespace troupe {

class HfWeights {
 public:
  // A checkpoint saved from a base model class (sentence-transformers saves
  // Qwen3Model, not Qwen3ForCausalLM) names its tensors without the
  // "model." prefix: they are looked up without it.
  HfWeights(const safetensors::Checkpoint& checkpoint, WeightStore& store)
      : ckpt_(checkpoint),
        store_(store),
        bare_(checkpoint.find("model.embed_tokens.weight") == nullptr &&
              checkpoint.find("embed_tokens.weight") != nullptr) {}

  // An embedding model's checkpoint (model/pooling.hpp) may lack the output
  // head: it is then left unbound, and only an embedding stage runs it.
  void set_embedding_model(bool on) { embedding_model_ = on; }
  bool embedding_model() const { return embedding_model_; }

  // The checkpoint's quantization (model/hf_quantization.hpp): matrix()
  // reads its F8_E4M3 or I8 matrices with their scales, or its packed 4-bit
  // ones.
  // Without one, such a matrix is Error(unsupported) like any dtype Troupe
  // does not compute with.
  void set_quantization(const HfQuantScheme& scheme) { quant_ = scheme; }

  // Adapters whose updates matrix() and transposed() bind to the matrices
  // they make (model/lora.hpp); null: none.
  void set_lora(LoraSet* lora) { lora_ = lora; }

  bool has(std::string_view name) const { return ckpt_.find(resolve(name)) != nullptr; }
  // Names that start with `from` are looked up with `to` in its place, so a
  // text model inside a multimodal checkpoint binds with its own names:
  // ("", "language_model.") for Mistral 3's, ("model.",
  // "model.language_model.") for Qwen3-VL's. ("", ""): none.
  void rename_prefix(std::string from, std::string to) {
    rename_from_ = std::move(from);
    rename_to_ = std::move(to);
  }
  // The tensor, checked to have this shape (outermost first). Throws
  // Error(bad_format) naming the tensor and both shapes.
  const safetensors::TensorInfo& expect(std::string_view name, std::initializer_list<int64_t> shape) const;
  // The tensor of either shape; which one is the caller's to tell by t.shape.
  const safetensors::TensorInfo& expect_either(std::string_view name, std::initializer_list<int64_t> a,
                                               std::initializer_list<int64_t> b) const;

  // A torch nn.Linear weight: [n_out, n_in], rows of n_in. Kept in its
  // dtype (f32, f16, bf16); copied only if its bytes are misaligned. A
  // quantized one (set_quantization) is unpacked into the store.
  Weight matrix(std::string_view name, int64_t n_in, int64_t n_out);
  // A GPT-2 Conv1D weight, stored [n_in, n_out]: transposed at load into
  // [n_out, n_in] rows, in its own dtype.
  Weight transposed(std::string_view name, int64_t n_in, int64_t n_out);
  // A 1-D tensor of n values, as an f32 copy (norms, biases).
  const float* vector(std::string_view name, int64_t n);
  const float* optional_vector(std::string_view name, int64_t n) { return has(name) ? vector(name, n) : nullptr; }
  // A 2-D tensor [n_rows, n_cols] as an f32 copy, rows contiguous (per-expert biases).
  const float* vector_rows(std::string_view name, int64_t n_rows, int64_t n_cols);
  // A U8 tensor of this shape (packed blocks the architecture unpacks, such
  // as gpt-oss's MXFP4 experts). Throws Error(bad_format) naming the tensor.
  const safetensors::TensorInfo& bytes(std::string_view name, std::initializer_list<int64_t> shape) const;
  // Where weights made at load go (conversions the architecture does itself).
  WeightStore& store() { return store_; }
  // 1 + the tensor's values (Gemma's RMSNorms scale by 1 + w), in f32.
  const float* vector_plus_one(std::string_view name, int64_t n);

 private:
  std::string resolve(std::string_view name) const;
  Weight stored_matrix(std::string_view name, int64_t n_in, int64_t n_out);
  Weight stored_transposed(std::string_view name, int64_t n_in, int64_t n_out);
  Weight with_lora(std::string_view name, Weight w) const;
  Weight eight_bit_matrix(const safetensors::TensorInfo& t, int64_t n_in, int64_t n_out);
  Weight int4_matrix(const std::string& base, int64_t n_in, int64_t n_out);
  ThreadPool& pool();

  const safetensors::Checkpoint& ckpt_;
  WeightStore& store_;
  std::string rename_from_, rename_to_;
  bool bare_ = false;
  bool embedding_model_ = false;
  std::optional<HfQuantScheme> quant_;
  std::unique_ptr<ThreadPool> pool_;  // made for the first quantized matrix
  LoraSet* lora_ = nullptr;
};

// Which optional tensors a Llama-family checkpoint carries.
struct LlamaTensors {
  bool qkv_bias = false;  // q/k/v_proj.bias (Qwen2; Llama with attention_bias)
  bool o_bias = false;    // o_proj.bias (Llama with attention_bias)
  bool qk_norm = false;   // self_attn.q_norm / k_norm (Qwen3)
  bool dense_ffn = true;  // mlp.gate/up/down_proj; false: the architecture binds its own FFN
  bool fused = false;     // self_attn.qkv_proj and mlp.gate_up_proj, used as row slices (Phi-3)
  // The norms before attention and the FFN (Apertus: attention_layernorm,
  // feedforward_layernorm).
  std::string_view attn_norm = "input_layernorm";
  std::string_view ffn_norm = "post_attention_layernorm";
};

// model.embed_tokens, model.norm and lm_head (unless tied), and
// w.layers sized to n_layer, empty: what every decoder but Gemma names alike.
void bind_model_ends(HfWeights& src, const ModelConfig& c, ModelWeights& w);

// Binds the tensors Llama, Mistral, Qwen2, Qwen3, Mixtral, Phi-3 and Granite name alike:
// model.embed_tokens, model.norm, lm_head (unless tied) and, per layer,
// input_layernorm, self_attn.*, post_attention_layernorm and (dense_ffn) mlp.*.
void bind_llama_weights(HfWeights& src, const ModelConfig& c, const LlamaTensors& t, ModelWeights& w);

// OLMo 2's post-norm layers (also EXAONE 4's): q/k/v/o_proj, q_norm and
// k_norm (over the whole projection when c.qk_norm_whole, else per head),
// post_attention_layernorm, post_feedforward_layernorm and the SwiGLU MLP;
// with model.embed_tokens, model.norm and lm_head.
void bind_post_norm_weights(HfWeights& src, const ModelConfig& c, ModelWeights& w);

// How a mixture-of-experts checkpoint names its FFN tensors, per layer:
// model.layers.N.<block>gate.weight (the router) and
// model.layers.N.<block>experts.E.<gate|up|down>.weight.
struct ExpertTensorNames {
  std::string_view block;  // "block_sparse_moe." (Mixtral), "mlp." (Qwen3-MoE)
  std::string_view gate, up, down;
};
// Takes the experts in either layout: one tensor per expert as above, or
// fused as <block>experts.gate_up_proj / down_proj (bind_fused_experts).
// Layers before first_layer are left to the caller (LFM2-MoE's dense ones).
void bind_experts(HfWeights& src, const ModelConfig& c, const ExpertTensorNames& names, ModelWeights& w,
                  int64_t first_layer = 0);
// Every expert's matrices from fused checkpoint tensors (named gate_up and
// down). Transposed, as Qwen3-VL-MoE and gpt-oss publish them: gate_up
// [n_expert, n_embd, 2 n_ff] (gate then up along the last dim, or
// interleaved column by column: gpt-oss) and down [n_expert, n_ff, n_embd],
// copied into [n_out, n_in]
// rows in the tensor's own type (f32, f16 or bf16). Or in nn.Linear's
// layout, as transformers 5 saves them and GraniteMoE publishes them
// ([n_expert, 2 n_ff, n_embd] gate rows then up rows, [n_expert, n_embd,
// n_ff]): used in place. A tensor of
// the Linear shape is taken as one (as transformers takes it) where both
// shapes are one; gpt-oss's interleaved ones must be transposed.
void bind_fused_experts(HfWeights& src, const ModelConfig& c, const std::string& gate_up, const std::string& down,
                        bool interleaved, LayerWeights& l);

// The FFNs of DeepSeek's layout (DeepSeek-V2/V3, GLM-4.5, ERNIE 4.5), under
// model.layers.N.mlp.: gate/up/down_proj of width n_ff_dense where
// is_moe(N) is false; else gate.weight (the router), the routing's
// correction bias (score_bias, when named: [n_expert], or [1, n_expert]
// with bias_row), experts.E.* of width n_ff, and shared_experts.* of width
// n_ff_shared (when > 0).
struct DeepseekFfn {
  std::function<bool(int64_t il)> is_moe;
  std::string_view score_bias;  // "gate.e_score_correction_bias", or empty
  bool bias_row = false;
};
void bind_deepseek_ffn(HfWeights& src, const ModelConfig& c, const DeepseekFfn& f, ModelWeights& w);


}  // namespace troupe
