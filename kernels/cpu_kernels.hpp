// CPU kernels: free functions over raw pointers and sizes. Each has a naive
// reference in tests/kernels and a tolerance test; SIMD paths are picked at
// run time (core/cpu_features) and tested against the scalar path.
// Dimension names: n_tokens, n_embd, n_head, n_head_kv, head_dim, n_vocab.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"
#include "core/thread_pool.hpp"
#include "memory/paged_kv.hpp"

namespace troupe::kernels {

// y[n_tokens, n_out] = x[n_tokens, n_in] · W[n_out, n_in]^T.
// W rows are stored in wtype (f32, f16, bf16, q8_0, q4_0, q4_1); x, y are f32
// and accumulation is f32. n_in must be a multiple of wtype's block size.
void matmul(float* y, const float* x, const void* w, DType wtype, int64_t n_tokens, int64_t n_in, int64_t n_out,
            ThreadPool& pool);

// y[t] = x[t] / rms(x[t]) * weight; x, y: [n_tokens, n_embd]; y may alias x.
void rmsnorm(float* y, const float* x, const float* weight, int64_t n_tokens, int64_t n_embd, float eps);

// y[t] = (x[t] - mean) / sqrt(var + eps) * weight + bias; bias may be null.
void layernorm(float* y, const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t n_embd,
               float eps);

enum class RopeLayout {
  normal,  // rotate adjacent pairs (x[2i], x[2i+1]): GGUF llama, llama2.c
  neox,    // rotate halves (x[i], x[i + n_rot/2]): Hugging Face, Qwen, GPT-NeoX
};

struct RopeParams {
  RopeLayout layout = RopeLayout::normal;
  int64_t n_rot = 0;        // rotated dims per head (<= head_dim); 0 means head_dim
  float theta = 10000.0f;   // base frequency
  float freq_scale = 1.0f;  // linear position scaling: angle uses pos * freq_scale
  // Optional per-pair divisors of the frequency ([n_rot / 2]), e.g. Llama 3's
  // rope scaling computed by the model from its config.
  const float* freq_factors = nullptr;
  // Multiplies the rotated dims (cos and sin): LongRoPE's attention factor,
  // so q.k grows by its square. Dims past n_rot pass through unscaled.
  float mscale = 1.0f;
};

// Rotates x in place: x [n_tokens, n_head, head_dim], pos [n_tokens].
void rope(float* x, const int32_t* pos, int64_t n_tokens, int64_t n_head, int64_t head_dim, const RopeParams& p);

// y = silu(gate) * up, elementwise over n values. y may alias gate.
void swiglu(float* y, const float* gate, const float* up, int64_t n);
// y = (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha * g), g = min(gate,
// limit): gpt-oss's expert activation. y may alias gate.
void swiglu_oai(float* y, const float* gate, const float* up, int64_t n, float alpha, float limit);

// y = gelu(x), tanh approximation (GPT-2's "gelu_new"). y may alias x.
void gelu(float* y, const float* x, int64_t n);
// y = x * Phi(x), the exact GELU (BERT's "gelu", torch's default). y may alias x.
void gelu_erf(float* y, const float* x, int64_t n);

// In-place numerically stable softmax over n values.
void softmax(float* x, int64_t n);

// y[t] = row ids[t] of table [n_vocab, n_embd] (any weight dtype), as f32.
void embedding(float* y, const void* table, DType t, const int32_t* ids, int64_t n_tokens, int64_t n_embd);

// Writes the new tokens' keys and values into the cache, at the positions the
// sequences' block tables give, rounded to the cache's type (kv.type, with
// memory/kv_type's reference rounding). k, v: [n_tokens, n_head_kv, head_dim].
void kv_write(const PagedKvView& kv, const float* k, const float* v, const AttnSeq* seqs, int n_seqs);

// Causal grouped-query attention over the paged cache (which must already
// hold the new tokens, see kv_write), read in place whatever its type. q, out: [n_tokens, n_head, head_dim];
// query head h reads kv head h / (n_head / n_head_kv). window > 0 limits each
// query to the last `window` positions (sliding-window attention). softcap >
// 0 turns each scaled score s into softcap * tanh(s / softcap) before the
// softmax (Gemma 2's attention logit soft-capping). sinks, when given
// ([n_head]), are gpt-oss's attention sinks: a logit per head that joins
// each row's softmax denominator and attends to nothing, so a row's
// weights sum to less than 1: out = sum_j exp(s_j) v_j / (sum_j exp(s_j) +
// exp(sink)). causal false lets every query of a sequence see all of its
// n_past + n_q keys (an encoder's bidirectional attention); with a window,
// those less than `window` positions away on either side (ModernBERT's
// local layers: |i - j| < window).
void attention(float* out, const float* q, const PagedKvView& kv, const AttnSeq* seqs, int n_seqs, int64_t n_head,
               float scale, ThreadPool& pool, int32_t window = 0, float softcap = 0.0f, const float* sinks = nullptr,
               bool causal = true);

// LFM2's gated short convolution of the sequences' new tokens (Backend::short_conv).
// bcx: [n_tokens, 3, n_embd] (B, C, x); y: [n_tokens, n_embd]; cache: one row
// of n_embd (head_dim) per position, n_head_kv 1; weight: [n_embd, taps].
void short_conv(float* y, const float* bcx, const PagedKvView& cache, const AttnSeq* seqs, int n_seqs,
                const float* weight, const float* bias, int64_t taps, ThreadPool& pool);

// The shape of a Gated DeltaNet layer (Qwen3-Next, Qwen3.5).
struct GatedDeltaShape {
  int64_t n_k_heads = 0;  // query/key heads
  int64_t n_v_heads = 0;  // value heads, a multiple of n_k_heads
  int64_t k_dim = 0;      // key head width (at most 512)
  int64_t v_dim = 0;      // value head width
  int64_t taps = 0;       // the causal conv's width (at most 16)
  // Value head h reads key head h % n_k_heads (tiled) rather than
  // h / (n_v_heads / n_k_heads) (grouped).
  bool tiled = false;

  int64_t conv_dim() const { return 2 * n_k_heads * k_dim + n_v_heads * v_dim; }
  // A sequence's state: the conv history [taps - 1, conv_dim], then
  // [n_v_heads, v_dim, k_dim].
  int64_t state_floats() const { return (taps - 1) * conv_dim() + n_v_heads * v_dim * k_dim; }
};

// The Gated DeltaNet core (Backend::gated_delta_net). qkv: [n_tokens,
// conv_dim], conv input in, conv output out; b, a: [n_tokens, n_v_heads];
// out: [n_tokens, n_v_heads, v_dim]; state: PagedKvView::state slots.
void gated_delta_net(float* out, float* qkv, const float* b, const float* a, const PagedKvView& state,
                     const AttnSeq* seqs, int n_seqs, const float* conv_w, const float* decay, const float* dt_bias,
                     const GatedDeltaShape& shape, ThreadPool& pool);

// The shape of a Mamba-2 layer (Granite 4.0-H): n_heads of head_dim, a
// state of d_state per head dim, B and C in n_groups groups.
struct Mamba2Shape {
  int64_t n_heads = 0;
  int64_t head_dim = 0;  // at most 1024
  int64_t d_state = 0;
  int64_t n_groups = 0;  // divides n_heads
  int64_t taps = 0;      // the causal conv's width (at most 16)

  int64_t inner() const { return n_heads * head_dim; }
  int64_t conv_dim() const { return inner() + 2 * n_groups * d_state; }  // x, B, C
  // in_proj's row: z [inner], x B C [conv_dim], dt [n_heads].
  int64_t proj_width() const { return inner() + conv_dim() + n_heads; }
  // A sequence's state: the conv history [taps - 1, conv_dim], then
  // [n_heads, head_dim, d_state].
  int64_t state_floats() const { return (taps - 1) * conv_dim() + n_heads * head_dim * d_state; }
};

// A Mamba-2 layer's small tensors (f32, backend memory).
struct Mamba2Weights {
  const float* conv = nullptr;       // [conv_dim, taps]
  const float* conv_bias = nullptr;  // [conv_dim] or null
  const float* a = nullptr;          // [n_heads] -exp(A_log)
  const float* dt_bias = nullptr;    // [n_heads]
  const float* d = nullptr;          // [n_heads] the skip
  const float* norm = nullptr;       // [inner] the gated RMSNorm's weight
  float norm_eps = 1e-5f;
};

// Mamba-2's scan (Backend::mamba2_scan). proj: [n_tokens, proj_width], its x
// B C columns convolved in place; y: [n_tokens, inner]; state: PagedKvView
// state slots.
void mamba2_scan(float* y, float* proj, const PagedKvView& state, const AttnSeq* seqs, int n_seqs,
                 const Mamba2Weights& w, const Mamba2Shape& shape, ThreadPool& pool);

}  // namespace troupe::kernels
