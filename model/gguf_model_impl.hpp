// The GGUF loader's internals shared by its files: what an architecture name
// means (GgufArch) and the model class that binds a file's tensors.
// gguf_model.cpp holds the table and the general reading, gguf_model_families.cpp
// the readers of the families that need more (experts, latent attention,
// local layers, scales, short convolutions). Not part of the library's API.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "model/gguf.hpp"
#include "model/lora.hpp"
#include "model/model.hpp"

namespace troupe::gguf_load {

// Where a layer's norms sit and what they are: RMSNorms before each block
// (most), RMSNorms after each block and none before (OLMo 2), LayerNorms
// with biases before each block, and a GELU MLP without a gate (StarCoder2),
// plain RMSNorms on both sides of each block (GLM-4), one LayerNorm without
// bias before attention and the MLP side by side (Command-R).
enum class GgufNorms { rms_before, rms_after, layer_before, rms_sandwich, layer_parallel };

// What a GGUF architecture name means here. llama.cpp's converter permutes
// the Q/K rows of "llama", "smollm3" and "granite" files (the adjacent-pair
// rotation then equals the checkpoint's rotate-half one); the others keep the
// checkpoint's rows and are rotated in halves (llama.cpp's NEOX rope type).
struct GgufArch {
  std::string_view name;
  kernels::RopeLayout rope;
  bool qk_norm;  // attn_q_norm / attn_k_norm per head
  bool moe;      // experts required (llama: experts when the file has them)
  bool gemma;    // Gemma 2 and 3's sandwich norms, local layers and scales
  bool fused;    // attn_qkv, and ffn_up holding gate then up (Phi-3)
  bool scales;   // Granite's embedding, residual, attention and logit scales
  GgufNorms norms = GgufNorms::rms_before;
  // The Architecture (ModelConfig::arch) that runs a file of this name where
  // it is another's layer: Seed-OSS is Llama's, Qwen3-VL's text models are
  // Qwen3's and Qwen3-MoE's, Ministral 3 has its own. Empty: the name itself.
  std::string_view runs_as = {};
};

// llama.cpp's LLAMA_POOLING_TYPE_RANK: a classifier's (cls.output's) pooling.
inline constexpr uint32_t kRankPooling = 4;

// Throws Error(unsupported) naming the file, the name and the supported ones.
const GgufArch& gguf_arch(const std::string& path, const std::string& name);

class GgufModel final : public Model {
 public:
  explicit GgufModel(gguf::GgufFile file) : file_(std::move(file)) {}
  // The file's tensors, with options.lora's adapters bound to the matrices
  // they update.
  void bind(const ModelLoadOptions& options);
  void bind_tensors(const ModelLoadOptions& options);
  // A "bert" file (gguf_bert.cpp): an encoder, bound apart from the decoders.
  void bind_bert(const ModelLoadOptions& options);
  // Its classifier head (cls.output, and cls where present), if it has one.
  void bind_bert_classifier(bool rank_pooling);
  // A "modern-bert" file (gguf_modernbert.cpp): ModernBERT, and its head.
  void bind_modernbert(const ModelLoadOptions& options);
  // A "nomic-bert" file (gguf_nomic_bert.cpp): NomicBERT.
  void bind_nomic_bert(const ModelLoadOptions& options);
  // A BERT-like encoder's input as llama.cpp writes it (gguf_bert.cpp):
  // token_embd (its rows the vocabulary), token_types as f32,
  // token_embd_norm with its bias, and <p>pooling_type where it is not
  // rank; returns the file's pooling_type (rank: a classifier's).
  std::optional<uint32_t> bind_encoder_embeddings(const std::string& p);
  // An encoder's sizes under `p` ("bert.", "modern-bert.") and what
  // follows its tensors (refused causal-reranker options, the weight
  // bytes, --quantize, the vocabulary) (gguf_bert.cpp).
  void read_encoder_sizes(const std::string& p);
  void finish_encoder(const ModelLoadOptions& options);
  // A causal reranker's head (pooling_type rank: cls.output over the last
  // token; gguf_classifier.cpp), in place of the LM head.
  void bind_causal_classifier(const std::string& p);
  // The labels of a classifier's cls.output (checked to be {n_embd,
  // labels}): <p>classifier.output_labels, else LABEL_<i> (gguf_classifier.cpp).
  std::vector<std::string> classifier_labels(const std::string& p, const gguf::TensorInfo& out) const;

 private:
  Weight matrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  // Expert e's [n_out, n_in] slice of a {n_in, n_out, n_expert} tensor.
  Weight expert_matrix(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert, int64_t e) const;
  void bind_experts(const std::string& b, LayerWeights& l) const;
  void bind_gated_shared_expert(const std::string& b, LayerWeights& l) const;
  void read_gpt_oss(const std::string& p);
  void read_deepseek_routing(const std::string& p, uint32_t default_gating);
  void bind_glm4moe_layer(const std::string& b, int64_t il, LayerWeights& l) const;
  void bind_deepseek_layer_ffn(const std::string& b, int64_t il, LayerWeights& l) const;
  void read_ernie_moe(const std::string& p);
  void read_deepseek2_attention(const std::string& p);
  void read_deepseek2_score_scale(const std::string& p);
  void bind_deepseek2_attention(const std::string& b, LayerWeights& l);
  void bind_gpt_oss_layer(const std::string& b, LayerWeights& l) const;
  int32_t read_sliding_window(const std::string& p) const;
  void read_local_layers(const std::string& p, uint32_t default_pattern);
  void read_gemma(const std::string& p, bool gemma2);
  void read_yarn(const std::string& p);
  void read_phi3(const std::string& p);
  void read_granite(const std::string& p);
  void read_lfm2_layers(const std::string& p);
  void read_xielu();
  void read_qwen_hybrid(const std::string& p);
  void read_granite_hybrid(const std::string& p);
  void bind_granite_hybrid_layer(const std::string& b, int64_t il, LayerWeights& l);
  // attention.head_count_kv as a list per layer (LFM2, Granite 4.0-H): sets
  // n_head_kv to the attention layers' count and returns 1 for each layer
  // with none; a single value: n_head_kv, and an empty list.
  std::vector<uint8_t> read_kv_head_counts(const std::string& p);
  // A depthwise conv's taps, {taps, channels} in f32, f16 or bf16, as an f32
  // copy [channels, taps] (LFM2, the Gated DeltaNet, Mamba-2).
  const float* conv_taps(const std::string& name, int64_t taps, int64_t channels);
  // An f32 tensor of this shape (ne order), e.g. Mamba-2's {1, n_heads}.
  const float* f32_tensor(const std::string& name, std::initializer_list<int64_t> shape) const;
  void bind_qwen_hybrid_layer(const std::string& b, int64_t il, LayerWeights& l);
  void bind_lfm2_layer(const std::string& b, int64_t il, LayerWeights& l);
  const float* vector(const std::string& name, int64_t n, bool required = true) const;
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(Errc::bad_format, file_.path() + ": " + what);
  }

  gguf::GgufFile file_;
  LoraSet* lora_ = nullptr;  // while bind runs, if adapters were given
};

}  // namespace troupe::gguf_load
