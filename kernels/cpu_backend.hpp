// The CPU backend: host memory, weights used in place from the mapped file,
// kernels from kernels/cpu_kernels.hpp on a thread pool.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/thread_pool.hpp"
#include "kernels/backend.hpp"
#include "memory/weight_slabs.hpp"

namespace troupe {

// Memory for a repacked matrix where the CPU backend keeps it (64-byte
// aligned): cut from `slabs`, or, too large for them, in transparent huge
// pages of its own. Freed with release_weight_memory, which also frees
// plain std::free memory that is not a piece of `slabs`.
void* packed_weight_memory(WeightSlabs& slabs, size_t bytes);
void release_weight_memory(WeightSlabs& slabs, void* p);

struct CpuBackendOptions {
  int n_threads = 0;  // 0: one per hardware thread
  // CPUs to pin the kernel threads to (ThreadPool); empty: the next ones of
  // the process's affinity plan (set_cpu_affinity), if there is one.
  std::vector<int> cpus;
};

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(CpuBackendOptions options = {});
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  std::string_view name() const override { return "cpu"; }
  ThreadPool& pool() { return pool_; }

  void* allocate(size_t bytes) override;
  void deallocate(void* p) override;
  Weight upload_weight(const Weight& host) override { return host; }
  // Repacks quantized weights for the int8 path (kernels/cpu/int8_packed.hpp)
  // when that path runs here and exact math is off.
  Weight prepare_matmul(const Weight& w) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void copy_from_host(void* dst, const void* src, size_t bytes) override;
  void synchronize() override {}

  bool runs_lora() const override { return true; }
  void matmul(float* y, const float* x, const Weight& w, int64_t n_tokens) override;
  void matmul_n(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens) override;
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
  void gather_rows(float* y, const float* x, const int32_t* rows, int64_t n_rows, int64_t n_cols) override;
  void short_conv(float* y, const float* bcx, const PagedKvView& cache, const AttnSeq* seqs, int n_seqs,
                  const float* weight, const float* bias, int64_t taps) override;
  void sigmoid_gate(float* y, const float* gate, int64_t n) override;
  void gated_delta_net(float* out, float* qkv, const float* b, const float* a, const PagedKvView& state,
                       const AttnSeq* seqs, int n_seqs, const float* conv_w, const float* decay, const float* dt_bias,
                       const kernels::GatedDeltaShape& shape) override;
  void mamba2_scan(float* y, float* proj, const PagedKvView& state, const AttnSeq* seqs, int n_seqs,
                   const kernels::Mamba2Weights& w, const kernels::Mamba2Shape& shape) override;
  void kv_write(const PagedKvView& kv, const float* k, const float* v, const AttnSeq* seqs, int n_seqs) override;
  void attention(float* out, const float* q, const PagedKvView& kv, const AttnSeq* seqs, int n_seqs, int64_t n_head,
                 float scale, int32_t window, float softcap, const float* sinks, bool causal) override;

 private:
  // fn(begin, end) over [0, n), split over the pool for a prefill's sizes.
  template <class F>
  void split_elements(int64_t n, F&& fn);
  // y = x · w^T, without w's LoRA updates; add_lora adds them to y
  // [n_tokens, w.n_out] from x [n_tokens, w.n_in].
  void matmul_weights(float* y, const float* x, const Weight& w, int64_t n_tokens);
  void add_lora(float* y, const float* x, const Weight& w, int64_t n_tokens);

  ThreadPool pool_;
  WeightSlabs weight_slabs_;  // the repacked matrices under WeightSlabs::kMaxPiece
  int64_t int8_bytes_ = 0;    // repacked for the int8 path (kernels::count_int8_packed_bytes)
};

}  // namespace troupe
