// The compute backend a model runs on. Model code (model/) calls only these
// operations, so the CPU backend and the CUDA backend share one forward pass.
// Pointers are backend memory (host memory for the CPU backend, device memory
// for CUDA); small index arrays (token ids, sequences, block tables) are host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/dtype.hpp"
#include "kernels/cpu_kernels.hpp"
#include "memory/paged_kv.hpp"

namespace troupe {

// The largest rank a backend runs (PEFT's releases go to 256).
inline constexpr int64_t kMaxLoraRank = 1024;

// A LoRA adapter's low-rank update of one matrix (model/lora.hpp): matmul
// adds (x · a^T) · B^T, the adapter's scale already in B. B is kept
// transposed, each of its rank rows holding all the rows of the tensor the
// adapter updates, so a matrix that is a row slice of that tensor (Phi-3's
// q, k and v in one qkv_proj) reads a contiguous part of each, from
// Weight::lora_row0. Host memory, owned by the model.
struct LoraDelta {
  const float* a = nullptr;   // [rank, n_in]
  const float* bt = nullptr;  // [rank, rows]: B^T
  int64_t rank = 0;
  int64_t rows = 0;                 // of the tensor the adapter updates
  const LoraDelta* next = nullptr;  // the next adapter's update of the same matrix, or null
};

// A weight matrix [n_out, n_in] (rows of n_in elements) in backend memory.
struct Weight {
  const void* data = nullptr;
  DType type = DType::f32;
  int64_t n_in = 0;   // row length (GGUF ne0)
  int64_t n_out = 0;  // number of rows (GGUF ne1)
  // CPU backend only: the weights repacked for the int8 path
  // (kernels/cpu/int8_packed.hpp), owned like an upload; null if not packed.
  const void* packed = nullptr;
  // Adapters' updates, run unmerged by a backend whose runs_lora() is true;
  // null without adapters.
  const LoraDelta* lora = nullptr;
  int64_t lora_row0 = 0;  // this matrix's first row within lora->bt's rows
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;

  // Memory for pools that live as long as the model (KV pages, the step
  // arena). Never called per step.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* p) = 0;
  // A weight in this backend's memory: the CPU backend uses the mapped file
  // bytes in place; a device backend uploads once.
  virtual Weight upload_weight(const Weight& host) = 0;
  // A matrix (already uploaded) that matmul will read: a backend may add a
  // layout of its own beside it (the CPU's int8 repacking, in w.packed, freed
  // with deallocate).
  virtual Weight prepare_matmul(const Weight& w) { return w; }
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  // Waits for queued work (a no-op on the CPU).
  virtual void synchronize() = 0;

  // Host memory for buffers that cross between this backend and the host
  // every step (hidden states handed to or from another stage, logits for
  // the sampler). A device backend returns pinned (page-locked) memory, so
  // copies to and from it are asynchronous DMA; the CPU's is plain aligned
  // memory. Never called per step: the tensor pools keep what they get.
  virtual void* host_alloc(size_t bytes);
  virtual void host_free(void* p);
  // Whether matmul and embedding run weights of this type here.
  virtual bool supports(DType type) const;
  // Whether matmul adds a Weight's LoRA updates (Weight::lora). A stage on
  // a backend that does not is refused when its weights are uploaded.
  virtual bool runs_lora() const { return false; }

  // y[n_tokens, w.n_out] = x[n_tokens, w.n_in] · w^T
  virtual void matmul(float* y, const float* x, const Weight& w, int64_t n_tokens) = 0;
  // One of several matrices that read the same input.
  struct MatmulOut {
    float* y = nullptr;
    const Weight* w = nullptr;
  };
  // y_i[n_tokens, w_i.n_out] = x · w_i^T for matrices of one n_in (q, k and
  // v; gate and up). A backend may run them as one matmul (the CPU quantizes
  // x once and splits the rows of all of them over its threads in one
  // dispatch); this default runs them in turn.
  virtual void matmul_n(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens);
  // y[n_tokens, n_embd] = rows ids of table [n_vocab, n_embd]
  virtual void embedding(float* y, const Weight& table, const int32_t* ids, int64_t n_tokens) = 0;
  virtual void rmsnorm(float* y, const float* x, const float* weight, int64_t n_tokens, int64_t n_embd,
                       float eps) = 0;
  virtual void layernorm(float* y, const float* x, const float* weight, const float* bias, int64_t n_tokens,
                         int64_t n_embd, float eps) = 0;
  // y += x over n values (the residual connection)
  virtual void add(float* y, const float* x, int64_t n) = 0;
  // y[r] += bias for each of n_rows rows of n_cols values
  virtual void add_bias(float* y, const float* bias, int64_t n_rows, int64_t n_cols) = 0;
  virtual void rope(float* x, const int32_t* pos, int64_t n_tokens, int64_t n_head, int64_t head_dim,
                    const kernels::RopeParams& p) = 0;
  virtual void swiglu(float* y, const float* gate, const float* up, int64_t n) = 0;
  // gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit,
  // limit), y = (u + 1) * g * sigmoid(alpha * g). y may alias gate.
  virtual void swiglu_oai(float* y, const float* gate, const float* up, int64_t n, float alpha, float limit) = 0;
  virtual void gelu(float* y, const float* x, int64_t n) = 0;  // tanh approximation
  // y = x * Phi(x), the exact (erf) GELU of BERT's "gelu". y may alias x.
  virtual void gelu_erf(float* y, const float* x, int64_t n) = 0;
  // y = max(x, 0) (DistilBERT's classifier head). y may alias x.
  virtual void relu(float* y, const float* x, int64_t n) = 0;
  // x * sigmoid(1.702 x): CLIP's quick GELU (its vision towers).
  virtual void quick_gelu(float* y, const float* x, int64_t n) = 0;
  // y = xIELU(x) over n values (Apertus), with the activation's effective
  // parameters (after their softplus): x > 0: alpha_p x^2 + beta x, else
  // (expm1(min(x, eps)) - x) alpha_n + beta x. y may alias x. The default
  // throws Errc::unsupported (the CPU and CUDA backends run it).
  virtual void xielu(float* y, const float* x, int64_t n, float alpha_p, float alpha_n, float beta, float eps);
  // y = gelu(gate) * up (tanh GELU; Gemma's GeGLU). y may alias gate.
  virtual void geglu(float* y, const float* gate, const float* up, int64_t n) = 0;
  // y = gelu_erf(gate) * up (ModernBERT's GeGLU, the exact GELU). y may alias gate.
  virtual void geglu_erf(float* y, const float* gate, const float* up, int64_t n) = 0;
  // x *= s over n values (Gemma's embedding scale).
  virtual void scale(float* x, float s, int64_t n) = 0;
  // x = cap * tanh(x / cap) over n values, cap > 0 (Gemma 2's logit soft-capping).
  virtual void soft_cap(float* x, float cap, int64_t n) = 0;
  // Gathers rows: y[i] = x[rows[i]] for n_rows rows of n_cols values.
  virtual void gather_rows(float* y, const float* x, const int32_t* rows, int64_t n_rows, int64_t n_cols) = 0;
  virtual void kv_write(const PagedKvView& kv, const float* k, const float* v, const AttnSeq* seqs,
                        int n_seqs) = 0;
  // See kernels::attention (cpu_kernels.hpp) for window, softcap, sinks
  // ([n_head] in backend memory, or null) and causal.
  virtual void attention(float* out, const float* q, const PagedKvView& kv, const AttnSeq* seqs, int n_seqs,
                         int64_t n_head, float scale, int32_t window, float softcap, const float* sinks,
                         bool causal) = 0;
  // LFM2's gated short convolution, between a conv layer's in and out
  // projections. bcx [n_tokens, 3 n_embd] holds each new token's B, C and x;
  // b*x is written to the token's row of `cache` (cache.k: one row of n_embd
  // per position), then y [n_tokens, n_embd] = C * (bias + sum over taps k
  // of weight[., k] * bx(position - taps + 1 + k)), bx read from the cache
  // (zero before position 0). weight [n_embd, taps]; bias [n_embd] or null.
  // The default throws Errc::unsupported (the CPU and CUDA backends run it).
  virtual void short_conv(float* y, const float* bcx, const PagedKvView& cache, const AttnSeq* seqs, int n_seqs,
                          const float* weight, const float* bias, int64_t taps);
  // y *= sigmoid(gate) over n values (Qwen3-Next's gated attention output).
  // The default throws Errc::unsupported (the CPU backend runs it).
  virtual void sigmoid_gate(float* y, const float* gate, int64_t n);
  // The Gated DeltaNet core of a recurrent layer (Qwen3-Next, Qwen3.5),
  // between its projections. Each sequence's tokens run in order from its
  // state slot (state.state, AttnSeq::state_slot; zero at n_past 0), which
  // they leave updated:
  //   qkv [n_tokens, conv_dim] (q, k and v of every head) goes through a
  //   causal depthwise conv (conv_w [conv_dim, taps]) and SiLU, in place;
  //   per value head h, with key head h / (n_v_heads / n_k_heads) (or
  //   h % n_k_heads, shape.tiled): q and k
  //   L2-normed, q / sqrt(k_dim); beta = sigmoid(b), g = decay[h] *
  //   softplus(a + dt_bias[h]) (decay = -exp(A_log));
  //   S = exp(g) S; S += beta (v - S k) k^T; out = S q.
  // b, a [n_tokens, n_v_heads]; out [n_tokens, n_v_heads, v_dim]. The
  // default throws Errc::unsupported (the CPU backend runs it).
  virtual void gated_delta_net(float* out, float* qkv, const float* b, const float* a, const PagedKvView& state,
                               const AttnSeq* seqs, int n_seqs, const float* conv_w, const float* decay,
                               const float* dt_bias, const kernels::GatedDeltaShape& shape);
  // Mamba-2's scan (Granite 4.0-H's recurrent layers), between in_proj and
  // out_proj. proj [n_tokens, z | x B C | dt] (shape.proj_width()): x B C go
  // through a causal depthwise conv (w.conv, w.conv_bias) and SiLU, in
  // place; then per head, from the sequence's slot (zero at n_past 0):
  // dt = softplus(dt + dt_bias); h = exp(dt a) h + dt x B^T; y = h C + d x,
  // B and C of the head's group; then y * silu(z), RMS-normed over each
  // group of inner / n_groups values, times w.norm. y [n_tokens, inner].
  // The default throws Errc::unsupported (the CPU backend runs it).
  virtual void mamba2_scan(float* y, float* proj, const PagedKvView& state, const AttnSeq* seqs, int n_seqs,
                           const kernels::Mamba2Weights& w, const kernels::Mamba2Shape& shape);
};

}  // namespace troupe
