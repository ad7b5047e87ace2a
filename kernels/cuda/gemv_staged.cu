// The single-token GEMV for 32-weight-chunk types (q8_0, q4_0, q4_1, q5_0,
// q5_1, the k-quants, iq4, mxfp4) with the activations staged in shared memory.
//
// In gemv.cu a lane takes one whole 32-weight chunk, so it reads that
// chunk's 32 activations, 128 contiguous bytes, as 8 float4 loads: one warp
// load then touches 32 different 128-byte lines (32 L1 wavefronts for 512
// bytes), which likely caps the quantized GEMV near a tenth of HBM
// (docs/cuda.md, Known limits). Here the block's four warps, which walk the
// same chunks of their four rows, first copy the activations of the next
// 64 chunks (8 KB) into shared memory with coalesced loads, then read
// them from there: rows of 36 floats per 32-chunk keep each warp's float4
// reads free of bank conflicts.
//
// Each lane sums its chunks in the same order with the same chunk_dot as
// gemv.cu's kernel, so every output is the plain kernel's bit for bit
// (CudaMatmul.StagedGemvEqualsThePlainOne). Opt-in (CudaBackendOptions::
// gemv_staging) until a GPU run measures it.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/gemv_loaders.cuh"
#include "kernels/cuda/launchers.hpp"
#include "kernels/cuda/reduce.cuh"

namespace troupe::cuda {
namespace {

using namespace gemv_detail;  // the loaders and chunk_dot, shared with gemv.cu

constexpr int kWarps = 4;             // rows a block
constexpr int kSpan = 64;             // chunks staged a step (each lane takes two, as gemv.cu's unroll)
constexpr int kChunkFloats = 32;      // weights (and activations) a chunk
constexpr int kStride = kChunkFloats + 4;  // floats a staged chunk takes: float4 reads conflict-free

struct SharedX {
  __device__ float4 operator()(const float4* p) const { return *p; }
};

template <class L>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_staged_kernel(float* __restrict__ y, const float* __restrict__ x, const unsigned char* __restrict__ w,
                       int64_t n_in, int64_t n_out, int64_t row_bytes) {
  static_assert(L::kChunk == kChunkFloats, "32-weight chunks only");
  __shared__ __align__(16) float xs[kSpan * kStride];
  const int lane = threadIdx.x & 31;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  // A warp past the last row still stages its share and meets every barrier.
  const bool active = o < n_out;
  const unsigned char* row = w + (active ? o : 0) * row_bytes;
  const int64_t n_chunks = n_in / kChunkFloats;
  const auto* x4 = reinterpret_cast<const float4*>(x);
  float acc = 0.0f;

  for (int64_t c0 = 0; c0 < n_chunks; c0 += kSpan) {
    const int64_t span = n_chunks - c0 < kSpan ? n_chunks - c0 : kSpan;
    __syncthreads();  // the previous span's reads are done
    // 8 float4 a chunk, consecutive threads on consecutive float4: coalesced.
    for (int64_t i = threadIdx.x; i < span * (kChunkFloats / 4); i += kWarps * 32) {
      const int64_t chunk = i / (kChunkFloats / 4), part = i % (kChunkFloats / 4);
      *reinterpret_cast<float4*>(xs + chunk * kStride + part * 4) = __ldg(x4 + c0 * (kChunkFloats / 4) + i);
    }
    __syncthreads();
    if (!active) continue;
    // Chunks c0 + lane and c0 + lane + 32, loaded before either is used (as
    // gemv.cu's kUnroll = 2), summed in that order.
    const auto* x0 = reinterpret_cast<const float4*>(xs + lane * kStride);
    const auto* x1 = reinterpret_cast<const float4*>(xs + (lane + 32) * kStride);
    if (span == kSpan) {  // unconditional, so the loads stay raw bytes until used (as in gemv.cu)
      float w0[kChunkFloats], w1[kChunkFloats];
      L::load(row, c0 + lane, w0);
      L::load(row, c0 + lane + 32, w1);
      acc += chunk_dot<kChunkFloats>(w0, x0, SharedX{});
      acc += chunk_dot<kChunkFloats>(w1, x1, SharedX{});
    } else {
      float wv[kChunkFloats];
      if (lane < span) {
        L::load(row, c0 + lane, wv);
        acc += chunk_dot<kChunkFloats>(wv, x0, SharedX{});
      }
      if (lane + 32 < span) {
        L::load(row, c0 + lane + 32, wv);
        acc += chunk_dot<kChunkFloats>(wv, x1, SharedX{});
      }
    }
  }
  if (active) {
    const float s = warp_sum(acc);
    if (lane == 0) y[o] = s;
  }
}

template <class L>
void launch(float* y, const float* x, const void* w, int64_t n_in, int64_t n_out, int64_t rb, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((n_out + kWarps - 1) / kWarps);
  gemv_staged_kernel<L><<<blocks, kWarps * 32, 0, stream>>>(y, x, static_cast<const unsigned char*>(w), n_in, n_out,
                                                            rb);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace

bool gemv_staged_supported(DType type, int64_t n_tokens) {
  return n_tokens == 1 && is_quantized(type);  // every block type reads 32-weight chunks in gemv.cu
}

void gemv_staged(float* y, const float* x, const void* w, DType type, int64_t n_in, int64_t n_out,
                 cudaStream_t stream) {
  if (!gemv_staged_supported(type, 1) || n_out <= 0 || n_out > int64_t{0x7fffffff} * kWarps ||
      !gemv_supported(w, type, x, 1, n_in)) {
    throw Error(Errc::invalid_argument, "cuda gemv_staged: unsupported operands (" + std::string(dtype_name(type)) +
                                            " n_in=" + std::to_string(n_in) + " n_out=" + std::to_string(n_out) + ")");
  }
  const int64_t rb = row_bytes(type, n_in);
  with_loader(type, [&](auto loader) {
    using L = decltype(loader);
    if constexpr (L::kChunk == kChunkFloats) launch<L>(y, x, w, n_in, n_out, rb, stream);
  });
}

}  // namespace troupe::cuda
