// The architectures Troupe runs. Each lives in its own file (arch_*.cpp):
// how to read it from a Hugging Face directory, and its forward pass as
// three steps built from the layer helpers (model/layers.hpp). ModelStage
// looks the architecture up by ModelConfig::arch.
#pragma once

#include <string>
#include <string_view>

#include "model/layers.hpp"

namespace troupe {

class HfConfig;
class HfWeights;

struct Architecture {
  std::string_view name;      // ModelConfig::arch: "llama", "qwen3", ...
  std::string_view hf_class;  // the config.json "architectures" entry it loads
  // Another entry it loads, or empty (Gemma 3's multimodal checkpoints, for
  // their text model).
  std::string_view hf_class_also = {};

  // Reads config.json into c and binds the checkpoint's tensors into w.
  void (*load_hf)(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) = nullptr;

  // First stage: x [n_tokens, n_embd] from ctx.tokens.
  void (*embed)(const layers::StepContext& ctx, float* x) = nullptr;
  // Layer il on the residual stream x [n_tokens, n_embd], in place.
  void (*layer)(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) = nullptr;
  // Last stage: the final norm of the rows that get logits, x [n_rows, n_embd], in place.
  void (*output_norm)(const layers::StepContext& ctx, float* x, int64_t n_rows) = nullptr;
};

// Throws Error(unsupported) naming the architecture and the supported ones.
const Architecture& architecture(std::string_view name);
// The architecture loading this config.json class, or nullptr.
const Architecture* find_hf_architecture(std::string_view hf_class);
// "LlamaForCausalLM, MistralForCausalLM, ..." for error messages.
std::string supported_hf_architectures();

namespace arch {
extern const Architecture llama;     // arch_llama.cpp (also GGUF "llama" files)
extern const Architecture mistral;   // arch_mistral.cpp
extern const Architecture ministral3;  // arch_mistral.cpp (also GGUF "mistral3" files)
extern const Architecture mistral3_multimodal;  // arch_mistral.cpp: loads the text model as mistral or ministral3
extern const Architecture llava_multimodal;     // arch_llava.cpp: loads LLaVA's text model as its own architecture
extern const Architecture qwen2;     // arch_qwen2.cpp (also GGUF "qwen2" files)
extern const Architecture qwen3;     // arch_qwen3.cpp (also GGUF "qwen3" and "qwen3vl" files)
extern const Architecture qwen3_vl;  // arch_qwen3.cpp: loads Qwen3-VL's text model as qwen3
extern const Architecture mixtral;   // arch_mixtral.cpp (also GGUF "llama" files with experts)
extern const Architecture qwen2moe;  // arch_qwen_moe.cpp (also GGUF "qwen2moe" files)
extern const Architecture qwen3moe;  // arch_qwen_moe.cpp (also GGUF "qwen3moe" and "qwen3vlmoe" files)
extern const Architecture qwen3_vl_moe;  // arch_qwen_moe.cpp: loads Qwen3-VL-MoE's text model as qwen3moe
extern const Architecture gemma2;    // arch_gemma.cpp (also GGUF "gemma2" files)
extern const Architecture gemma3;    // arch_gemma.cpp (also GGUF "gemma3" files)
extern const Architecture phi3;      // arch_phi3.cpp (also GGUF "phi3" files)
extern const Architecture hunyuan_dense;  // arch_hunyuan.cpp (also GGUF "hunyuan-dense" files)
extern const Architecture minimax_m2;  // arch_minimax_m2.cpp (also GGUF "minimax-m2" files)
extern const Architecture apertus;   // arch_apertus.cpp (also GGUF "apertus" files)
extern const Architecture olmoe;     // arch_olmoe.cpp (also GGUF "olmoe" files)
extern const Architecture olmo2;     // arch_olmo2.cpp (also GGUF "olmo2" files)
extern const Architecture smollm3;   // arch_smollm3.cpp (also GGUF "smollm3" files)
extern const Architecture granitemoe;  // arch_granite.cpp (also GGUF "granitemoe" files)
extern const Architecture granite;   // arch_granite.cpp (also GGUF "granite" files)
extern const Architecture granitehybrid;  // arch_granite.cpp (also GGUF "granitehybrid" files)
extern const Architecture starcoder2;  // arch_starcoder2.cpp (also GGUF "starcoder2" files)
extern const Architecture gpt2;      // arch_gpt2.cpp
extern const Architecture bert;      // arch_bert.cpp: an encoder (ModelConfig::causal false), for embeddings
extern const Architecture roberta;   // arch_bert.cpp: BERT with offset positions
extern const Architecture xlm_roberta;  // arch_bert.cpp: RoBERTa's multilingual checkpoints
extern const Architecture modernbert;   // arch_modernbert.cpp: a rotary encoder with local and global layers
extern const Architecture distilbert;   // arch_bert.cpp: BERT without token types, under DistilBERT's names
extern const Architecture nomic_bert;   // arch_nomic_bert.cpp: BERT with RoPE and SwiGLU (also GGUF "nomic-bert")
extern const Architecture gpt_oss;   // arch_gpt_oss.cpp (also GGUF "gpt-oss" files)
extern const Architecture glm4;      // arch_glm4.cpp (also GGUF "glm4" files)
extern const Architecture glm4moe;   // arch_glm4_moe.cpp (also GGUF "glm4moe" files)
extern const Architecture exaone4;   // arch_exaone4.cpp (also GGUF "exaone4" files)
extern const Architecture deepseek2; // arch_deepseek.cpp
extern const Architecture deepseek3; // arch_deepseek.cpp
extern const Architecture ernie4_5;  // arch_ernie.cpp (also GGUF "ernie4_5" files)
extern const Architecture ernie4_5_moe;  // arch_ernie.cpp (also GGUF "ernie4_5-moe" files)
extern const Architecture command_r; // arch_cohere.cpp (also GGUF "command-r" files)
extern const Architecture cohere2;   // arch_cohere.cpp (also GGUF "cohere2" files)
extern const Architecture lfm2;      // arch_lfm2.cpp (also GGUF "lfm2" files)
extern const Architecture lfm2moe;   // arch_lfm2.cpp (also GGUF "lfm2moe" files)
extern const Architecture qwen3next; // arch_qwen3_next.cpp (also GGUF "qwen3next" files)
extern const Architecture qwen35;    // arch_qwen3_next.cpp (also GGUF "qwen35" files)
extern const Architecture qwen35moe; // arch_qwen3_next.cpp (also GGUF "qwen35moe" files)
extern const Architecture qwen35_multimodal;     // arch_qwen3_next.cpp: loads Qwen3.5's text model as qwen35
extern const Architecture qwen35moe_multimodal;  // arch_qwen3_next.cpp: ... and Qwen3.5-MoE's as qwen35moe

// The pieces the RMSNorm decoders share: the token embedding, and the final
// RMSNorm with model.norm (and the division by logit_scale, layers::output_rms_norm).
void rms_output_norm(const layers::StepContext& ctx, float* x, int64_t n_rows);
// The final LayerNorm with its bias (GPT-2, StarCoder2).
void layer_output_norm(const layers::StepContext& ctx, float* x, int64_t n_rows);
}  // namespace arch

}  // namespace troupe
