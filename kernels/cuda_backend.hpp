// The CUDA backend's public face: options, a factory and a probe, compilable
// without CUDA headers (everything CUDA stays behind a pimpl in kernels/cuda/).
// Defined only where troupe_cuda is built: code that uses it checks
// TROUPE_HAVE_CUDA (a public compile definition of troupe_cuda).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/backend.hpp"

namespace troupe {

// How f32 weight matrices (n_out > 1) are stored on the device; vectors (norm
// weights, biases: n_out == 1) always stay f32 because kernels read them as
// float*. f16/bf16 and GGUF block weights are stored as they come.
enum class WeightPrecision { bf16, f16, f32 };

// Which kernel runs prefill attention (several queries of a sequence).
// scalar: fp32 throughout, the CPU kernel's precision. tensor_cores: WMMA
// fragments on 16-bit operands (bf16 for a bf16 KV cache, f16 otherwise)
// with fp32 accumulation, on sm_80+ and head_dim a multiple of 16 (else the
// scalar kernel runs). automatic: TROUPE_CUDA_PREFILL_ATTENTION
// (scalar | tensor_cores) when set, else scalar: the tensor-core kernel
// becomes the default once a GPU run has checked it (docs/cuda.md).
enum class PrefillAttention { automatic, scalar, tensor_cores };

// The single-token GEMV of block-type weights (q4_0, q8_0, the k-quants...):
// on stages the activations in shared memory with coalesced loads
// (kernels/cuda/gemv_staged.cu; the same outputs, bit for bit). automatic:
// TROUPE_CUDA_GEMV_STAGING (0 | 1) when set, else off until a GPU run has
// measured it (docs/cuda.md).
enum class GemvStaging { automatic, off, on };

struct CudaBackendOptions {
  int device = 0;
  WeightPrecision f32_weights = WeightPrecision::bf16;
  // Replay repeated op sequences (decode steps of one batch shape) as CUDA
  // graphs; off: every op is launched as it comes.
  bool cuda_graphs = true;
  PrefillAttention prefill_attention = PrefillAttention::automatic;
  GemvStaging gemv_staging = GemvStaging::automatic;
  int max_graphs = 32;                         // cached graph executables (LRU)
  size_t workspace_bytes = size_t{256} << 20;  // per-op scratch: bf16 activations, dequantized tiles, attention partials
  size_t staging_bytes = size_t{16} << 20;     // pinned host->device staging for index arrays
  size_t weight_chunk_bytes = size_t{512} << 20;  // the weight pool grows by chunks of this size
};

struct CudaBackendStats {
  int64_t graph_captures = 0;
  int64_t graph_replays = 0;
  int64_t eager_ops = 0;    // ops launched one by one (not from a graph)
  int64_t fused_ops = 0;    // op pairs merged (rope q+k, residual add + rmsnorm)
  int64_t direct_copies = 0;  // host<->device copies of pinned buffers (async DMA, no bounce)
  size_t weight_bytes = 0;  // live bytes in the weight pool
  size_t pool_bytes = 0;    // live bytes from allocate() (KV pages, arenas)
};

// True when a CUDA device can be used; otherwise false and, if why is given,
// the reason (e.g. "cudaGetDeviceCount failed: error 35 ...": no driver).
bool cuda_available(std::string* why = nullptr);
// Visible devices; 0 where cuda_available() is false.
int cuda_device_count();

// Errors: a failed CUDA or cuBLAS call throws Error(unavailable) naming the
// CUDA error (out_of_memory for a failed allocation), so the step fails
// and its requests get the error. After a sticky error (an illegal address,
// a kernel fault: the context is lost) every later call throws
// Error(unavailable) with that first error at once.
class CudaBackend final : public Backend {
 public:
  // Throws Error(unsupported) without a usable device, naming the reason.
  explicit CudaBackend(CudaBackendOptions options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string_view name() const override { return "cuda"; }
  std::string device_name() const;
  size_t free_device_memory() const;
  // Whether prefill attention runs on tensor cores (options.prefill_attention
  // resolved, and the device is sm_80+); with head_dim, for heads of that size
  // (a multiple of 16 whose tiles fit the device's shared memory).
  bool tensor_core_prefill(int64_t head_dim = 0) const;
  CudaBackendStats stats() const;

  // Device memory for pools (KV pages, the step arena): one cudaMalloc each,
  // zero-filled. Never called per step. deallocate also frees uploaded
  // weights (each upload_weight result once) and never fails for a device
  // fault, so teardown after a failed step completes.
  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  // Copies a host weight into the weight pool (f32 matrices converted as
  // options say). A weight already in device memory is returned unchanged.
  // The same host tensor uploaded again (a tied embedding that is also the
  // output head) shares the first copy; host bytes must not change while
  // an upload of them is live (they are the model's read-only mapping).
  Weight upload_weight(const Weight& host) override;
  // A pinned host buffer (host_alloc, or cudaHostRegister'ed memory) is
  // copied by async DMA on the backend's stream with no bounce: for
  // copy_from_host, src must stay unchanged until the next copy_to_host or
  // synchronize. Other host memory: small copies are staged (src is free on
  // return), large ones are synchronous.
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void copy_from_host(void* dst, const void* src, size_t bytes) override;
  void synchronize() override;
  // Pinned (page-locked, portable) host memory: what hidden states and
  // logits cross the host in.
  void* host_alloc(size_t bytes) override;
  void host_free(void* p) override;
  // f32 (stored as options say), f16, bf16, q8_0, q4_0, q4_1.
  bool supports(DType type) const override;

  void matmul(float* y, const float* x, const Weight& w, int64_t n_tokens) override;
  void embedding(float* y, const Weight& table, const int32_t* ids, int64_t n_tokens) override;
  void rmsnorm(float* y, const float* x, const float* weight, int64_t n_tokens, int64_t n_embd, float eps) override;
  void layernorm(float* y, const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t n_embd,
                 float eps) override;
  void add(float* y, const float* x, int64_t n) override;
  void add_bias(float* y, const float* bias, int64_t n_rows, int64_t n_cols) override;
  void rope(float* x, const int32_t* pos, int64_t n_tokens, int64_t n_head, int64_t head_dim,
            const kernels::RopeParams& p) override;
  void swiglu(float* y, const float* gate, const float* up, int64_t n) override;
  void swiglu_oai(float* y, const float* gate, const float* up, int64_t n, float alpha, float limit) override;
  void gelu(float* y, const float* x, int64_t n) override;
  void gelu_erf(float* y, const float* x, int64_t n) override;
  void relu(float* y, const float* x, int64_t n) override;
  void quick_gelu(float* y, const float* x, int64_t n) override;
  void xielu(float* y, const float* x, int64_t n, float alpha_p, float alpha_n, float beta, float eps) override;
  void geglu(float* y, const float* gate, const float* up, int64_t n) override;
  void geglu_erf(float* y, const float* gate, const float* up, int64_t n) override;
  void scale(float* x, float s, int64_t n) override;
  void soft_cap(float* x, float cap, int64_t n) override;
  // y and x must not overlap (rows are copied in parallel).
  void gather_rows(float* y, const float* x, const int32_t* rows, int64_t n_rows, int64_t n_cols) override;
  void kv_write(const PagedKvView& kv, const float* k, const float* v, const AttnSeq* seqs, int n_seqs) override;
  void short_conv(float* y, const float* bcx, const PagedKvView& cache, const AttnSeq* seqs, int n_seqs,
                  const float* weight, const float* bias, int64_t taps) override;
  void sigmoid_gate(float* y, const float* gate, int64_t n) override;
  void gated_delta_net(float* out, float* qkv, const float* b, const float* a, const PagedKvView& state,
                       const AttnSeq* seqs, int n_seqs, const float* conv_w, const float* decay, const float* dt_bias,
                       const kernels::GatedDeltaShape& shape) override;
  void mamba2_scan(float* y, float* proj, const PagedKvView& state, const AttnSeq* seqs, int n_seqs,
                   const kernels::Mamba2Weights& w, const kernels::Mamba2Shape& shape) override;
  void attention(float* out, const float* q, const PagedKvView& kv, const AttnSeq* seqs, int n_seqs, int64_t n_head,
                 float scale, int32_t window, float softcap, const float* sinks, bool causal) override;

  // Benchmarks build models directly on the device (no multi-GB host files):
  // an uninitialised-then-filled weight in the weight pool, values uniform in
  // [-scale, scale] from a counter-based hash of (seed, index); type is f32,
  // f16 or bf16.
  Weight random_weight(DType type, int64_t n_in, int64_t n_out, float scale, uint64_t seed);
  // An f32 device vector of n copies of value, in the weight pool.
  float* constant_vector(int64_t n, float value);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

inline std::unique_ptr<CudaBackend> make_cuda_backend(CudaBackendOptions options = {}) {
  return std::make_unique<CudaBackend>(options);
}

}  // namespace troupe
