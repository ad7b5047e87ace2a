// Recorded backend ops: each Backend call becomes one fixed-size record of
// device pointers and scalars (host index arrays have already been staged to
// the device). A run of records is either launched one by one or, when the
// same run repeats (decode steps of one batch shape), captured once as a CUDA
// graph and replayed; equal runs are recognised by comparing record bytes, so
// every field is 8 bytes wide (no padding) and unused bytes are zero.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/device_context.hpp"

namespace troupe::cuda {

enum class OpKind : int64_t {
  h2d,          // staged host data -> device
  matmul,
  gemv_n,       // fused GEMVs of matmuls that read the same x (q, k, v; gate, up)
  embedding,
  rmsnorm,
  add_rmsnorm,  // fused residual add + RMSNorm
  layernorm,
  add,
  add_bias,
  swiglu,
  gelu,
  gelu_erf,
  relu,
  quick_gelu,
  xielu,        // an ElementOp: s, s2, s3, s4 = alpha_p, alpha_n, beta, eps
  geglu,
  swiglu_oai,
  scale,
  soft_cap,
  gather_rows,
  rope,
  kv_write,
  attention,
  short_conv,  // an AttnOp: out = y, q = bcx, k = weight, v = bias, n_head = taps
  sigmoid_gate,     // an ElementOp: y *= sigmoid(a)
  gated_delta_net,  // a GdnOp
  mamba2_scan,      // a Mamba2Op
};

struct H2dOp {
  void* dst;
  const void* src;  // pinned host memory
  int64_t bytes;
};

struct MatmulOp {
  float* y;
  const float* x;
  const void* w;
  int64_t type;  // DType
  int64_t n_in;
  int64_t n_out;
  int64_t n_tokens;
};

// Up to kGemvMaxMats matmuls of one weight type and n_in that read the
// same x, all on the GEMV: one launch (gemv_n in launchers.hpp).
inline constexpr int kFusedGemvs = 3;
struct GemvNOp {
  float* y[kFusedGemvs];
  const void* w[kFusedGemvs];
  int64_t n_out[kFusedGemvs];
  const float* x;
  int64_t type;  // DType
  int64_t n_in;
  int64_t n_tokens;
  int64_t n_mats;
};

struct EmbeddingOp {
  float* y;
  const void* table;
  int64_t type;  // DType
  const int32_t* ids;
  int64_t n_tokens;
  int64_t n_embd;
};

// rmsnorm: y = norm(x) * w; add_rmsnorm: x += r, then that; layernorm: + b.
struct NormOp {
  float* y;
  float* x;
  const float* r;
  const float* w;
  const float* b;
  int64_t n_tokens;
  int64_t n_embd;
  double eps;
};

// add: y += a; add_bias: y[row] += a (n_cols wide); swiglu: y = silu(a) * b;
// gelu: y = gelu(a); geglu: y = gelu(a) * b (s != 0: the exact GELU); scale: y *= s;
// soft_cap: y = s * tanh(y / s);
// gather_rows: y[i] = a[rows[i]] (rows = b).
struct ElementOp {
  float* y;
  const float* a;
  const void* b;
  int64_t n;
  int64_t n_cols;
  double s = 0.0;   // scale or cap (8 bytes: records are padding-free); swiglu_oai's alpha
  double s2 = 0.0;  // swiglu_oai's limit
  double s3 = 0.0;  // xielu's beta
  double s4 = 0.0;  // xielu's eps
};

struct RopeOp {
  float* q;
  float* k;  // null: q only
  const int32_t* pos;
  const double* inv_freq;
  int64_t n_tokens;
  int64_t n_head;
  int64_t n_head_kv;
  int64_t head_dim;
  int64_t n_rot;
  int64_t neox;
  double freq_scale;
  double mscale;
};

// kv_write (k, v: the new keys and values) and attention (q -> out); also
// short_conv, with the fields its OpKind names.
struct AttnOp {
  float* out;
  const float* q;
  const float* k;
  const float* v;
  void* k_cache;
  void* v_cache;
  int64_t n_blocks;
  int64_t block_size;
  int64_t n_head_kv;
  int64_t head_dim;
  const void* meta;  // staged DevSeq / tables / dec / tiles blob
  int64_t tables_off;
  int64_t dec_off;
  int64_t tiles_off;
  int64_t key_end_off;  // -1: none (causal)
  int64_t n_seqs;
  int64_t n_dec;
  int64_t n_tiles;
  int64_t max_q;
  int64_t n_head;
  double scale;
  int64_t window;
  int64_t bidirectional;  // 1: every query sees its whole sequence (an encoder)
  int64_t n_splits;
  int64_t split_len;
  int64_t kv_type;      // KvType of the cache rows
  int64_t prefill_mma;  // 1: prefill tiles on tensor cores (attention_mma.cu)
  double softcap;       // 0: off
  const float* sinks;   // [n_head] attention sinks (gpt-oss), or null
};

// The Gated DeltaNet (launchers.hpp, GdnArgs): its arrays and shape, and
// the staged DevSeq blob of the batch (AttnPlan: the slots ride in DevSeq).
struct GdnOp {
  float* out;
  float* qkv;
  const float* b;
  const float* a;
  float* state;
  const float* conv_w;
  const float* decay;
  const float* dt_bias;
  const void* meta;
  int64_t n_seqs;
  int64_t max_q;
  int64_t state_floats;
  int64_t n_k_heads;
  int64_t n_v_heads;
  int64_t k_dim;
  int64_t v_dim;
  int64_t taps;
  int64_t tiled;
};

// Mamba-2's scan (launchers.hpp, Mamba2Args) and the staged DevSeq blob.
struct Mamba2Op {
  float* y;
  float* proj;
  float* state;
  const float* conv;
  const float* conv_bias;
  const float* a;
  const float* dt_bias;
  const float* d;
  const float* norm;
  const void* meta;
  int64_t n_seqs;
  int64_t max_q;
  int64_t n_tokens;
  int64_t state_floats;
  int64_t n_heads;
  int64_t head_dim;
  int64_t d_state;
  int64_t n_groups;
  int64_t taps;
  double norm_eps;
};

struct Op {
  OpKind kind;
  union {
    H2dOp h2d;
    MatmulOp matmul;
    GemvNOp gemv_n;
    EmbeddingOp embedding;
    NormOp norm;
    ElementOp element;
    RopeOp rope;
    AttnOp attn;
    GdnOp gdn;
    Mamba2Op mamba2;
  };

  explicit Op(OpKind k);  // zero-fills every byte, then sets the kind
};

// Launches one record on ctx's stream.
void execute(const Op& op, const DeviceContext& ctx);

// Merges `next` into `prev` when one fused launch does both (rope of q then
// of k with the same positions; a residual add then the RMSNorm of its
// result; GEMV matmuls of one x, type and n_in, up to kFusedGemvs).
// Returns true when merged.
bool try_fuse(Op& prev, const Op& next);

// Hash of a run of records (their bytes).
uint64_t hash_ops(const std::vector<Op>& ops);

}  // namespace troupe::cuda
