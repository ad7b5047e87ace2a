// config.json of a Hugging Face model directory: typed access to its keys
// (every error names the file and the key), and the readers the
// architectures share: Llama-family hyperparameters and RoPE settings.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "model/model_config.hpp"

namespace troupe {

class HfConfig {
 public:
  // Reads and parses the file; Error(io) when it cannot be read,
  // Error(bad_format) when it is not a JSON object.
  static HfConfig load(const std::string& path);
  HfConfig(nlohmann::json json, std::string path);

  const std::string& path() const { return path_; }
  const nlohmann::json& json() const { return json_; }
  // Present and not null (transformers writes null for "not set").
  bool has(std::string_view key) const;

  // Required keys throw Error(bad_format) "missing key" / "key 'x' is not an
  // integer"; the fallback forms return it when the key is absent or null.
  int64_t get_int(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key) const;
  double get_float(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;
  std::string get_string(std::string_view key, const std::string& fallback) const;

  [[noreturn]] void fail(Errc code, const std::string& what) const;

 private:
  const nlohmann::json* find(std::string_view key) const;

  nlohmann::json json_;
  std::string path_;
};

// Sizes, heads, head_dim, RMSNorm epsilon, context and tied embeddings, as
// every Llama-family config (and Gemma's) spells them.
void read_decoder_sizes(const HfConfig& cfg, ModelConfig& c);

// The hyperparameters every Llama-family config spells the same way
// (Llama, Mistral, Qwen2, Qwen3, Mixtral): sizes, heads, head_dim, RMSNorm
// epsilon, context, tied embeddings, SiLU activation and RoPE (rotate-half
// layout, as Hugging Face checkpoints store Q/K rows).
void read_llama_config(const HfConfig& cfg, ModelConfig& c);

// RoPE from either spelling: transformers 5's "rope_parameters" object, or
// "rope_theta" plus a "rope_scaling" object (type "default", "linear",
// "llama3", "longrope" or "yarn"; also "partial_rotary_factor"). Needs c.head_dim.
// Other scaling types throw Error(unsupported) naming them.
void read_rope_config(const HfConfig& cfg, ModelConfig& c);

// Which layers are local (sliding-window attention), into c.local_layers,
// and c.sliding_window: transformers 5's "layer_types", or the older
// "sliding_window_pattern" (every pattern-th layer global; Gemma 2's and
// gpt-oss's configs may have neither and alternate, default_pattern 2).
// Needs c.n_layer.
void read_layer_kinds(const HfConfig& cfg, ModelConfig& c, int64_t default_pattern);

// RoPE of models with two kinds of layers (Gemma 3, OLMo 3): transformers 5
// writes one settings object per layer type under "rope_parameters"; older
// files have rope_theta and rope_scaling, for the global layers, and the
// local layers take legacy_local_theta (nullopt: the global base), unscaled.
// A scaled or partial RoPE on the local layers is Error(unsupported).
void read_layer_kind_rope(const HfConfig& cfg, ModelConfig& c, std::optional<double> legacy_local_theta);

// The mixture of experts as DeepSeek-V2/V3 and GLM-4.5 configs spell it:
// moe_intermediate_size, n_routed_experts, num_experts_per_tok,
// routed_scaling_factor, n_group / topk_group, norm_topk_prob (sigmoid
// routers only) and n_shared_experts (their width: that many experts').
void read_deepseek_moe_config(const HfConfig& cfg, ModelConfig& c, ModelConfig::ExpertRouter router);

// An encoder's sizes (BERT's and ModernBERT's config.json keys):
// vocab_size, hidden_size, num_hidden_layers, num_attention_heads (as many
// KV heads), intermediate_size, max_position_embeddings; causal false.
// Throws Error(bad_format) for heads that do not tile the width or no
// positions.
void read_encoder_sizes(const HfConfig& cfg, ModelConfig& c);
// GPT-2's spelling of the sizes (GPT-2, and nomic's NomicBERT configs):
// vocab_size, n_embd, n_layer, n_head (as many kv heads), n_inner (null:
// 4 n_embd), layer_norm_epsilon (1e-5). The context is the caller's.
void read_gpt2_sizes(const HfConfig& cfg, ModelConfig& c);

// Shape checks shared by every loader: sizes positive, heads divide evenly.
void check_config(const HfConfig& cfg, const ModelConfig& c);
// A multimodal checkpoint's text model config ("text_config"), its
// tie_word_embeddings taken from the top level where that names one (as
// transformers ties by it). Fails naming the key when absent.
HfConfig text_config_of(const HfConfig& cfg);
// The layer kinds a config lists in layer_types ([num_hidden_layers] of
// the `allowed` names), or an empty list when it has none.
std::vector<std::string> read_layer_types(const HfConfig& cfg, int64_t n_layer,
                                          std::initializer_list<std::string_view> allowed);

}  // namespace troupe
