// Launchers of the CUDA kernels (the __global__ code stays in the .cu files).
// All pointers are device memory; a launcher checks its shapes, launches on
// `stream` and checks the launch. Semantics match kernels/cpu_kernels.hpp.
// Dimension names: n_tokens, n_embd, n_head, n_head_kv, head_dim, n_vocab.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "memory/paged_kv.hpp"

namespace troupe::cuda {

// ---- elementwise.cu ----------------------------------------------------
void add(float* y, const float* x, int64_t n, cudaStream_t stream);                      // y += x
void add_bias(float* y, const float* bias, int64_t n_rows, int64_t n_cols, cudaStream_t stream);
void swiglu(float* y, const float* gate, const float* up, int64_t n, cudaStream_t stream);  // silu(gate) * up
void gelu(float* y, const float* x, int64_t n, cudaStream_t stream);                     // tanh approximation
void gelu_erf(float* y, const float* x, int64_t n, cudaStream_t stream);                 // x * Phi(x)
void relu(float* y, const float* x, int64_t n, cudaStream_t stream);                     // max(x, 0)
void quick_gelu(float* y, const float* x, int64_t n, cudaStream_t stream);               // x sigmoid(1.702 x)
void xielu(float* y, const float* x, int64_t n, float alpha_p, float alpha_n, float beta, float eps,
           cudaStream_t stream);  // Backend::xielu
// gelu(gate) * up; erf: the exact GELU, else the tanh one
void geglu(float* y, const float* gate, const float* up, int64_t n, bool erf, cudaStream_t stream);
// (clamp(up, -limit, limit) + 1) * g * sigmoid(alpha g), g = min(gate, limit)
void swiglu_oai(float* y, const float* gate, const float* up, int64_t n, float alpha, float limit,
                cudaStream_t stream);
void scale(float* x, float s, int64_t n, cudaStream_t stream);                           // x *= s
void soft_cap(float* x, float cap, int64_t n, cudaStream_t stream);                      // x = cap tanh(x / cap)
void sigmoid_gate(float* y, const float* gate, int64_t n, cudaStream_t stream);        // y *= sigmoid(gate)
// y[i] = x[rows[i]] for n_rows rows of n_cols floats; rows is device memory.
void gather_rows(float* y, const float* x, const int32_t* rows, int64_t n_rows, int64_t n_cols, cudaStream_t stream);
// y[n_tokens, n_embd] = rows ids (device) of table [n_vocab, n_embd] in any weight dtype.
void embedding(float* y, const void* table, DType type, const int32_t* ids, int64_t n_tokens, int64_t n_embd,
               cudaStream_t stream);
// f32 -> bf16 or f16 (round to nearest even; f16 saturates at +-65504 rather
// than overflowing to inf), for the 16-bit GEMM inputs.
void convert_f32(void* y, DType to, const float* x, int64_t n, cudaStream_t stream);
// Uniform values in [-scale, scale] from a hash of (seed, index); type f32, f16 or bf16.
void fill_random(void* y, DType type, int64_t n, float scale, uint64_t seed, cudaStream_t stream);
void fill(float* y, float value, int64_t n, cudaStream_t stream);
// y = x with 16-byte accesses (n a multiple of 4, aligned): the HBM copy-bandwidth probe.
void copy_floats(float* y, const float* x, int64_t n, cudaStream_t stream);

// ---- norm_rope.cu ------------------------------------------------------
void rmsnorm(float* y, const float* x, const float* weight, int64_t n_tokens, int64_t n_embd, float eps,
             cudaStream_t stream);
// The residual add fused with the next norm: x += r, then y = rmsnorm(x) * weight.
// y may equal x or r exactly, or be disjoint from both.
void add_rmsnorm(float* y, float* x, const float* r, const float* weight, int64_t n_tokens, int64_t n_embd, float eps,
                 cudaStream_t stream);
// bias may be null.
void layernorm(float* y, const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t n_embd,
               float eps, cudaStream_t stream);

struct RopeArgs {
  int64_t n_rot = 0;                // even, <= head_dim
  bool neox = false;                // pairs (i, i + n_rot/2) instead of (2i, 2i+1)
  double freq_scale = 1.0;
  double mscale = 1.0;              // times the rotated dims (LongRoPE's attention factor)
  const double* inv_freq = nullptr; // [n_rot / 2], device: theta^(-2i/n_rot) / freq_factor[i]
};
// Rotates q [n_tokens, n_head, head_dim] and, when k is not null, k
// [n_tokens, n_head_kv, head_dim] in one pass: each (token, pair) angle is
// computed once (in double, as the CPU does) and applied to every head.
void rope_qk(float* q, float* k, const int32_t* pos, int64_t n_tokens, int64_t n_head, int64_t n_head_kv,
             int64_t head_dim, const RopeArgs& args, cudaStream_t stream);

// ---- gemv.cu -----------------------------------------------------------
// The weight-only (dequantizing) GEMV for decode: y[n_tokens, n_out] =
// x[n_tokens, n_in] · W^T with f32 x and accumulation, W in any weight dtype.
inline constexpr int64_t kGemvMaxTokens = 8;
// Whether gemv() takes these operands (n_tokens, alignment, row length).
bool gemv_supported(const void* w, DType type, const float* x, int64_t n_tokens, int64_t n_in);
void gemv(float* y, const float* x, const void* w, DType type, int64_t n_tokens, int64_t n_in, int64_t n_out,
          cudaStream_t stream);
// gemv_staged.cu: the single-token GEMV of the block types with the
// activations staged in shared memory (coalesced reads); outputs equal
// gemv()'s bit for bit. Opt-in: CudaBackendOptions::gemv_staging.
bool gemv_staged_supported(DType type, int64_t n_tokens);
void gemv_staged(float* y, const float* x, const void* w, DType type, int64_t n_in, int64_t n_out,
                 cudaStream_t stream);
// Several matrices of one type and n_in times the same x, in one launch:
// y[i][n_tokens, n_out[i]] = x · w[i]^T for i < n (at most kGemvMaxMats).
// Each row is computed exactly as gemv() computes it.
inline constexpr int kGemvMaxMats = 3;
void gemv_n(float* const* y, const float* x, const void* const* w, const int64_t* n_out, int n, DType type,
            int64_t n_tokens, int64_t n_in, cudaStream_t stream);
// Rows [0, n_rows) of a q8_0/q4_0/q4_1/f16/f32 matrix as bf16 (for prefill GEMMs).
void dequantize_rows_bf16(uint16_t* y, const void* w, DType type, int64_t n_rows, int64_t n_in, cudaStream_t stream);

// ---- attention.cu ------------------------------------------------------
// One sequence as the kernels see it (16 bytes, staged to the device).
struct DevSeq {
  int32_t q_begin;
  int32_t n_q;
  int32_t n_past;
  int32_t table;       // index of its first block-table entry in AttnMeta::tables
  int32_t state_slot;  // recurrent-state slot (AttnSeq::state_slot), -1: none
};

// A batch's sequences in device memory. Sequences with one query go to the
// split-KV decode kernel (dec lists them); longer ones are cut into tiles of
// kAttnTileQ queries for the prefill kernel (tiles holds (seq, q0) pairs).
struct AttnMeta {
  const DevSeq* seqs = nullptr;
  const int32_t* tables = nullptr;
  const int32_t* dec = nullptr;    // [n_dec] sequence indices
  const int32_t* tiles = nullptr;  // [n_tiles][2]: sequence index, first query
  // [rows]: query row r sees keys before key_end[r] (AttnSeq::key_end; rows
  // of sequences without one hold position + 1). Null: causal.
  const int32_t* key_end = nullptr;
  int32_t n_seqs = 0;
  int32_t n_dec = 0;
  int32_t n_tiles = 0;
  int32_t max_q = 0;  // most queries of one sequence
};
inline constexpr int kAttnTileQ = 32;
inline constexpr int64_t kAttnMaxHeadDim = 256;

// Copies the new tokens' k, v [n_tokens, n_head_kv, head_dim] into the cache.
void kv_write(const PagedKvView& kv, const float* k, const float* v, const AttnMeta& meta, cudaStream_t stream);

struct AttnArgs {
  int64_t n_head = 0;
  float scale = 1.0f;
  int32_t window = 0;
  bool causal = true;    // false: each query sees its whole sequence (an encoder)
  float softcap = 0.0f;  // > 0: scores become softcap * tanh(s / softcap) (Gemma 2)
  const float* sinks = nullptr;  // [n_head]: a logit per head in each softmax's denominator (gpt-oss)
  // Decode: each (sequence, head) is split into n_splits ranges of split_len
  // keys (flash-decoding); partials holds their (max, sum, acc) when n_splits > 1.
  int32_t n_splits = 1;
  int32_t split_len = 0;
  float* partials = nullptr;  // [n_dec, n_head, n_splits, head_dim + 2]
  // Prefill tiles on tensor cores (attention_mma.cu); the caller checked
  // attention_prefill_mma_supported.
  bool prefill_mma = false;
};
// Floats of `partials` a decode launch needs.
int64_t attention_partial_floats(int64_t n_dec, int64_t n_head, int64_t n_splits, int64_t head_dim);
// Causal GQA attention over the paged cache; q, out: [n_tokens, n_head, head_dim].
void attention(float* out, const float* q, const PagedKvView& kv, const AttnMeta& meta, const AttnArgs& args,
               cudaStream_t stream);
// Raises the dynamic shared memory limit of the prefill kernels on the
// current device (once per device, before any launch or graph capture).
void attention_init();

// ---- short_conv.cu -----------------------------------------------------
// LFM2's gated short convolution of the sequences' new tokens (see
// Backend::short_conv): bcx [n_tokens, 3, n_embd]; y [n_tokens, n_embd];
// cache rows of n_embd (cache.head_dim), one per position.
void short_conv(float* y, const float* bcx, const PagedKvView& cache, const float* weight, const float* bias,
                int64_t taps, const AttnMeta& meta, cudaStream_t stream);

// ---- gated_delta.cu ----------------------------------------------------
// The Gated DeltaNet core of Qwen3-Next and Qwen3.5 (see
// Backend::gated_delta_net): the conv over qkv [n_tokens, conv_dim] in
// place, then the delta rule per (sequence, value head) into out
// [n_tokens, n_v_heads, v_dim], each sequence's state in its slot of state.
struct GdnArgs {
  float* out = nullptr;
  float* qkv = nullptr;
  const float* b = nullptr;  // [n_tokens, n_v_heads]
  const float* a = nullptr;  // [n_tokens, n_v_heads]
  float* state = nullptr;    // [n_slots, state_floats]
  int64_t state_floats = 0;
  const float* conv_w = nullptr;   // [conv_dim, taps]
  const float* decay = nullptr;    // [n_v_heads] -exp(A_log)
  const float* dt_bias = nullptr;  // [n_v_heads]
  int64_t n_k_heads = 0, n_v_heads = 0, k_dim = 0, v_dim = 0, taps = 0;
  bool tiled = false;
};
inline constexpr int64_t kGdnMaxKeyDim = 512;
inline constexpr int64_t kGdnMaxTaps = 16;
void gated_delta_net(const GdnArgs& args, const AttnMeta& meta, cudaStream_t stream);

// Mamba-2's scan (see Backend::mamba2_scan): the conv over proj's x B C
// columns in place, the scan per (sequence, head) into y [n_tokens, inner],
// then the grouped gated RMSNorm of y by z.
struct Mamba2Args {
  float* y = nullptr;
  float* proj = nullptr;   // [n_tokens, inner + conv_dim + n_heads]
  float* state = nullptr;  // [n_slots, state_floats]
  int64_t state_floats = 0;
  const float* conv = nullptr;       // [conv_dim, taps]
  const float* conv_bias = nullptr;  // [conv_dim] or null
  const float* a = nullptr;          // [n_heads] -exp(A_log)
  const float* dt_bias = nullptr;    // [n_heads]
  const float* d = nullptr;          // [n_heads]
  const float* norm = nullptr;       // [inner]
  float norm_eps = 1e-5f;
  int64_t n_heads = 0, head_dim = 0, d_state = 0, n_groups = 0, taps = 0;
  int64_t n_tokens = 0;  // rows of proj and y (every sequence's)
};
inline constexpr int64_t kMamba2MaxState = 4096;
void mamba2_scan(const Mamba2Args& args, const AttnMeta& meta, cudaStream_t stream);

// ---- attention_mma.cu --------------------------------------------------
// The tensor-core prefill kernel: on devices of compute capability cc_major
// >= 8, for head_dim a multiple of 16 (up to kAttnMaxHeadDim) whose tiles
// fit the shared memory a block may opt into (smem_optin bytes: head_dim
// 256 needs 128 KB, more than sm_86/89 give).
bool attention_prefill_mma_supported(int cc_major, int smem_optin, int64_t head_dim);
// The prefill tiles of meta (only) on tensor cores.
void attention_prefill_mma(float* out, const float* q, const PagedKvView& kv, const AttnMeta& meta,
                           const AttnArgs& args, cudaStream_t stream);
// Raises its dynamic shared memory limit to what the largest head_dim needs,
// or smem_optin if less (once per device, sm_80+ only).
void attention_mma_init(int smem_optin);

}  // namespace troupe::cuda
