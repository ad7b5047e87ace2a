// Tensor parallelism inside a stage (Megatron style) over NCCL: a linear
// layer's weight is split across the ranks of a group, one rank per device.
//   column-parallel: W [n_out, n_in] split by rows (output features); each
//     rank computes its slice y_r [n_tokens, n_out / world] from the full x.
//   row-parallel: W split by columns (input features); each rank multiplies
//     its slice of x and an all-reduce sums the partial products, so every
//     rank ends with the full y [n_tokens, n_out].
// An MLP is column-parallel gate/up, a local SwiGLU, row-parallel down: one
// all-reduce per layer. Built only with NCCL (TROUPE_HAVE_NCCL).
// A kernel-level building block, tested on its own (tests/cuda): ModelStage
// does not use it, and a pipeline stage runs on one device.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.hpp"

namespace troupe::cuda {

enum class TpSplit {
  columns,  // column-parallel: split the output features (weight rows)
  rows,     // row-parallel: split the input features (weight columns)
};

struct TpWeight {
  TpSplit split = TpSplit::columns;
  int64_t n_in = 0;   // of the whole weight
  int64_t n_out = 0;
  std::vector<Weight> shards;  // [world]: shard r lives on rank r's device
};

class TensorParallelGroup {
 public:
  // One rank per device (empty: every visible device), communicators from
  // ncclCommInitAll. Throws Error(unsupported) without a usable device.
  explicit TensorParallelGroup(std::vector<int> devices = {});
  ~TensorParallelGroup();
  TensorParallelGroup(const TensorParallelGroup&) = delete;
  TensorParallelGroup& operator=(const TensorParallelGroup&) = delete;

  int world_size() const;
  int device(int rank) const;

  // n floats of zeroed device memory on rank's device, freed with the group.
  float* alloc(int rank, int64_t n);
  void upload(int rank, float* dst, const float* src, int64_t n);
  void download(int rank, float* dst, const float* src, int64_t n);

  // Splits a host weight [n_out, n_in] and uploads shard r to rank r (f32
  // weights become bf16, as in CudaBackend; other dtypes stay as they are).
  // The split dimension must divide evenly (and into whole quant blocks).
  TpWeight shard(const Weight& host, TpSplit split);

  // y[r] [n_tokens, n_out / world] = x[r] [n_tokens, n_in] · shard_r^T.
  void column_parallel(std::span<float* const> y, std::span<const float* const> x, const TpWeight& w,
                       int64_t n_tokens);
  // y[r] [n_tokens, n_out] = sum over ranks of x[r] [n_tokens, n_in / world] · shard_r^T.
  void row_parallel(std::span<float* const> y, std::span<const float* const> x, const TpWeight& w, int64_t n_tokens);
  // buf[r] [n] = sum over ranks of buf[r], in place.
  void all_reduce_sum(std::span<float* const> buf, int64_t n);
  // y = silu(gate) * up on one rank (the MLP's local activation).
  void swiglu(int rank, float* y, const float* gate, const float* up, int64_t n);
  void synchronize();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::cuda
