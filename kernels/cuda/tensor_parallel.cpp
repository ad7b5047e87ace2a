// TensorParallelGroup: per-rank device contexts, NCCL communicators, weight
// sharding and the column/row-parallel products.
#include "kernels/cuda/tensor_parallel.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_context.hpp"
#include "kernels/cuda/launchers.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda_backend.hpp"

namespace troupe::cuda {
namespace {

constexpr size_t kRankWorkspace = size_t{64} << 20;

void check_nccl(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) {
    throw Error(Errc::unavailable, std::string("NCCL error ") + std::to_string(static_cast<int>(r)) + " (" +
                                    ncclGetErrorString(r) + ") in " + call);
  }
}
#define TROUPE_NCCL_CHECK(call) check_nccl((call), #call)

}  // namespace

struct TensorParallelGroup::Impl {
  std::vector<int> devices;
  std::vector<std::unique_ptr<DeviceContext>> ctx;  // [world]
  std::vector<ncclComm_t> comms;                    // [world]
  std::vector<std::pair<int, void*>> owned;         // (rank, device pointer)

  ~Impl() {
    for (size_t r = 0; r < ctx.size(); ++r) {
      cudaSetDevice(devices[r]);
      cudaStreamSynchronize(ctx[r]->stream());
    }
    for (ncclComm_t c : comms) ncclCommDestroy(c);
    for (auto& [rank, p] : owned) {
      cudaSetDevice(devices[static_cast<size_t>(rank)]);
      cudaFree(p);
    }
  }

  void use(int rank) const { TROUPE_CUDA_CHECK(cudaSetDevice(devices[static_cast<size_t>(rank)])); }

  void* alloc_bytes(int rank, size_t bytes) {
    use(rank);
    void* p = nullptr;
    TROUPE_CUDA_CHECK(cudaMalloc(&p, bytes));
    owned.emplace_back(rank, p);
    return p;
  }
};

TensorParallelGroup::TensorParallelGroup(std::vector<int> devices) : impl_(std::make_unique<Impl>()) {
  std::string why;
  if (!cuda_available(&why)) throw Error(Errc::unsupported, "tensor parallel group: " + why);
  const int n = cuda_device_count();
  if (devices.empty()) {
    for (int d = 0; d < n; ++d) devices.push_back(d);
  }
  for (int d : devices) {
    if (d < 0 || d >= n) {
      throw Error(Errc::invalid_argument, "tensor parallel group: device " + std::to_string(d) + " of " +
                                              std::to_string(n) + " visible");
    }
  }
  Impl& m = *impl_;
  m.devices = devices;
  for (int d : devices) m.ctx.push_back(std::make_unique<DeviceContext>(d, kRankWorkspace));
  m.comms.resize(devices.size());
  TROUPE_NCCL_CHECK(ncclCommInitAll(m.comms.data(), static_cast<int>(devices.size()), devices.data()));
}

TensorParallelGroup::~TensorParallelGroup() = default;

int TensorParallelGroup::world_size() const { return static_cast<int>(impl_->devices.size()); }
int TensorParallelGroup::device(int rank) const { return impl_->devices.at(static_cast<size_t>(rank)); }

float* TensorParallelGroup::alloc(int rank, int64_t n) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  auto* p = static_cast<float*>(impl_->alloc_bytes(rank, bytes));
  // On the rank's own stream: it is non-blocking, so a legacy-stream
  // cudaMemset would not be ordered before the uploads and products queued
  // there. Synchronized too, for callers that use p from another stream.
  cudaStream_t s = impl_->ctx[static_cast<size_t>(rank)]->stream();
  TROUPE_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, s));
  TROUPE_CUDA_CHECK(cudaStreamSynchronize(s));
  return p;
}

void TensorParallelGroup::upload(int rank, float* dst, const float* src, int64_t n) {
  impl_->use(rank);
  cudaStream_t s = impl_->ctx[static_cast<size_t>(rank)]->stream();
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyHostToDevice, s));
  TROUPE_CUDA_CHECK(cudaStreamSynchronize(s));
}

void TensorParallelGroup::download(int rank, float* dst, const float* src, int64_t n) {
  impl_->use(rank);
  cudaStream_t s = impl_->ctx[static_cast<size_t>(rank)]->stream();
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost, s));
  TROUPE_CUDA_CHECK(cudaStreamSynchronize(s));
}

TpWeight TensorParallelGroup::shard(const Weight& host, TpSplit split) {
  const int64_t world = world_size();
  const int64_t block = dtype_info(host.type).block_size;
  const bool by_rows = split == TpSplit::columns;  // column-parallel splits weight rows
  const int64_t n_split = by_rows ? host.n_out : host.n_in;
  if (host.data == nullptr || host.n_in <= 0 || host.n_out <= 0 || n_split % world != 0 ||
      (!by_rows && (host.n_in / world) % block != 0)) {
    throw Error(Errc::invalid_argument, "tensor parallel shard: weight [" + std::to_string(host.n_out) + ", " +
                                            std::to_string(host.n_in) + "] does not split evenly over " +
                                            std::to_string(world) + " ranks");
  }
  TpWeight out{.split = split, .n_in = host.n_in, .n_out = host.n_out, .shards = {}};
  const int64_t rows = by_rows ? host.n_out / world : host.n_out;
  const int64_t cols = by_rows ? host.n_in : host.n_in / world;
  const bool to_bf16 = host.type == DType::f32;
  const DType type = to_bf16 ? DType::bf16 : host.type;
  const int64_t src_row = row_bytes(host.type, host.n_in);
  const int64_t src_cols = row_bytes(host.type, cols);  // bytes of one shard row in the source
  std::vector<unsigned char> buf(static_cast<size_t>(row_bytes(type, cols) * rows));
  for (int64_t r = 0; r < world; ++r) {
    // Gather shard r's rows into buf (converting f32 to bf16 on the way).
    for (int64_t i = 0; i < rows; ++i) {
      const auto* src = static_cast<const unsigned char*>(host.data) + (by_rows ? (r * rows + i) * src_row
                                                                                : i * src_row + r * src_cols);
      unsigned char* dst = buf.data() + i * row_bytes(type, cols);
      if (to_bf16) {
        for (int64_t j = 0; j < cols; ++j) {
          float f;
          std::memcpy(&f, src + j * 4, 4);
          const uint16_t b = f32_to_bf16(f);
          std::memcpy(dst + j * 2, &b, 2);
        }
      } else {
        std::memcpy(dst, src, static_cast<size_t>(src_cols));
      }
    }
    void* dev = impl_->alloc_bytes(static_cast<int>(r), buf.size());
    cudaStream_t s = impl_->ctx[static_cast<size_t>(r)]->stream();
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(dev, buf.data(), buf.size(), cudaMemcpyHostToDevice, s));
    TROUPE_CUDA_CHECK(cudaStreamSynchronize(s));
    out.shards.push_back({.data = dev, .type = type, .n_in = cols, .n_out = rows});
  }
  return out;
}

void TensorParallelGroup::column_parallel(std::span<float* const> y, std::span<const float* const> x,
                                          const TpWeight& w, int64_t n_tokens) {
  const auto world = static_cast<size_t>(world_size());
  if (w.split != TpSplit::columns || y.size() != world || x.size() != world || w.shards.size() != world) {
    throw Error(Errc::invalid_argument, "column_parallel: needs a column-split weight and one y and x per rank");
  }
  for (size_t r = 0; r < world; ++r) {
    impl_->use(static_cast<int>(r));
    matmul(*impl_->ctx[r], y[r], x[r], w.shards[r], n_tokens);
  }
}

void TensorParallelGroup::row_parallel(std::span<float* const> y, std::span<const float* const> x, const TpWeight& w,
                                       int64_t n_tokens) {
  const auto world = static_cast<size_t>(world_size());
  if (w.split != TpSplit::rows || y.size() != world || x.size() != world || w.shards.size() != world) {
    throw Error(Errc::invalid_argument, "row_parallel: needs a row-split weight and one y and x per rank");
  }
  for (size_t r = 0; r < world; ++r) {
    impl_->use(static_cast<int>(r));
    matmul(*impl_->ctx[r], y[r], x[r], w.shards[r], n_tokens);
  }
  all_reduce_sum(y, n_tokens * w.n_out);
}

void TensorParallelGroup::all_reduce_sum(std::span<float* const> buf, int64_t n) {
  const auto world = static_cast<size_t>(world_size());
  if (buf.size() != world || n < 0) throw Error(Errc::invalid_argument, "all_reduce_sum: one buffer per rank");
  // One thread drives every rank: the calls must be grouped.
  TROUPE_NCCL_CHECK(ncclGroupStart());
  for (size_t r = 0; r < world; ++r) {
    TROUPE_NCCL_CHECK(ncclAllReduce(buf[r], buf[r], static_cast<size_t>(n), ncclFloat, ncclSum, impl_->comms[r],
                                    impl_->ctx[r]->stream()));
  }
  TROUPE_NCCL_CHECK(ncclGroupEnd());
}

void TensorParallelGroup::swiglu(int rank, float* y, const float* gate, const float* up, int64_t n) {
  impl_->use(rank);
  cuda::swiglu(y, gate, up, n, impl_->ctx.at(static_cast<size_t>(rank))->stream());
}

void TensorParallelGroup::synchronize() {
  for (size_t r = 0; r < impl_->ctx.size(); ++r) {
    impl_->use(static_cast<int>(r));
    TROUPE_CUDA_CHECK(cudaStreamSynchronize(impl_->ctx[r]->stream()));
  }
}

}  // namespace troupe::cuda
