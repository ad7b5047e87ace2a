// Quantization at load (`--quantize`): which type each matrix gets. Plain
// types (q8_0, q4_0, ..., mxfp4, bf16) put every quantizable matrix in that type.
// The k-quant and i-quant file types (q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k,
// iq4_nl, iq4_xs) follow the per-tensor rules of llama.cpp's llama-quantize
// for its file types of those names, so a Hugging Face checkpoint quantized
// at load holds the tensor types of the GGUF file a user would download.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/dtype.hpp"
#include "model/model_config.hpp"

namespace troupe {

struct QuantScheme {
  std::string name;  // lower case, as parse_quant_scheme accepts it
  DType base;        // the type of most matrices
  bool mixed;        // llama.cpp's per-tensor rules apply
};

// "q4_k_m", "Q4_K_M", "q8_0", ... Throws Error(invalid_argument) naming the
// accepted names.
QuantScheme parse_quant_scheme(std::string_view name);
// The accepted names, comma-separated.
std::string quant_scheme_names();

// What the per-tensor rules need of a model.
struct QuantShape {
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_expert = 0;  // 0 or 1: a dense FFN
  bool tied_output = false;  // the token embedding is also the output head
};

inline QuantShape quant_shape(const ModelConfig& c) {
  return {.n_layer = c.n_layer, .n_head = c.n_head, .n_head_kv = c.n_head_kv, .n_expert = c.n_expert,
          .tied_output = c.tied_output};
}

// The type of the matrix labelled `label` (for_each_matrix's labels:
// "token_embd", "output", "blk.3.attn_v", "blk.0.ffn_down.expert.2") with
// rows of n_in values, or f16 where no quantized type's block divides n_in
// (llama.cpp's fallbacks: q2_K/q3_K/iq4_xs -> iq4_nl, q4_K -> q5_0, q5_K ->
// q5_1, q6_K -> q8_0). For a plain scheme, its type (the caller checks the
// block).
DType scheme_type(const QuantScheme& s, const std::string& label, int64_t n_in, const QuantShape& shape);

// llama.cpp's use_more_bits: the layers of a Q4_K_M/Q5_K_M file whose attn_v
// and ffn_down take q6_K (the first and last eighth, and every third between).
bool use_more_bits(int64_t layer, int64_t n_layer);

}  // namespace troupe
