// LFM2's short convolution on the device (CudaBackend::short_conv). As on
// the CPU (kernels/cpu/short_conv.cpp, which says why), each position's
// conv input b*x lives in the layer's KV pages, one row of n_embd a token.
//
// Two launches on the stream: the first forms b*x of every new token into
// y and stores it to the token's cache row (a block per token); the second
// convolves each new token over the rows taps - 1 back, read from the cache
// in its type, and gates the result by C into y. Scalar fp32 math, as the
// CPU kernel's: a handful of multiply-adds per output, memory-bound.
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launchers.hpp"

namespace troupe::cuda {
namespace {

constexpr int kThreads = 256;

// Block (sequence blockIdx.x, its tokens j = blockIdx.y, blockIdx.y +
// gridDim.y, ...): y[row] = B * x, then the row into the cache.
template <int KT>
__global__ void conv_write_kernel(float* __restrict__ y, unsigned char* __restrict__ cache,
                                  const float* __restrict__ bcx, int64_t block_size, int64_t e, int64_t row_bytes,
                                  AttnMeta meta) {
  const DevSeq s = meta.seqs[blockIdx.x];
  const int32_t* table = meta.tables + s.table;
  const int64_t units = KT == kQ8 ? e / kQ8Group : e;
  for (int j = blockIdx.y; j < s.n_q; j += gridDim.y) {
    const int64_t row = static_cast<int64_t>(s.q_begin) + j;
    const float* t = bcx + row * 3 * e;  // [B | C | x]
    float* bx = y + row * e;
    for (int64_t c = threadIdx.x; c < e; c += blockDim.x) bx[c] = t[c] * t[2 * e + c];
    __syncthreads();  // a q8_0 unit reads 32 values other threads wrote
    const int64_t p = static_cast<int64_t>(s.n_past) + j;
    unsigned char* dst = cache + (static_cast<int64_t>(table[p / block_size]) * block_size + p % block_size) * row_bytes;
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) kv_store_unit<KT>(dst, bx, u, e);
  }
}

// y[row, c] = C[row, c] * (bias[c] + sum_k w[c, k] * bx(p - taps + 1 + k, c)).
template <int KT>
__global__ void conv_kernel(float* __restrict__ y, const unsigned char* __restrict__ cache,
                            const float* __restrict__ bcx, const float* __restrict__ weight,
                            const float* __restrict__ bias, int64_t taps, int64_t block_size, int64_t e,
                            int64_t row_bytes, AttnMeta meta) {
  const DevSeq s = meta.seqs[blockIdx.x];
  const int32_t* table = meta.tables + s.table;
  for (int j = blockIdx.y; j < s.n_q; j += gridDim.y) {
    const int64_t row = static_cast<int64_t>(s.q_begin) + j;
    const int64_t pos = static_cast<int64_t>(s.n_past) + j;
    for (int64_t c = threadIdx.x; c < e; c += blockDim.x) {
      float acc = bias != nullptr ? bias[c] : 0.0f;
      for (int64_t k = 0; k < taps; ++k) {
        const int64_t p = pos - (taps - 1) + k;
        if (p < 0) continue;  // the causal padding before position 0
        const unsigned char* src =
            cache + (static_cast<int64_t>(table[p / block_size]) * block_size + p % block_size) * row_bytes;
        acc += weight[c * taps + k] * kv_load<KT>(src, c, e);
      }
      y[row * e + c] = bcx[row * 3 * e + e + c] * acc;
    }
  }
}

template <int KT>
void launch(float* y, const float* bcx, const PagedKvView& cache, const float* weight, const float* bias,
            int64_t taps, const AttnMeta& meta, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(meta.n_seqs), static_cast<unsigned>(meta.max_q < 256 ? meta.max_q : 256));
  auto* rows = static_cast<unsigned char*>(cache.k);
  const int64_t rb = cache.row_bytes();
  conv_write_kernel<KT><<<grid, kThreads, 0, stream>>>(y, rows, bcx, cache.block_size, cache.head_dim, rb, meta);
  TROUPE_CUDA_CHECK_LAUNCH();
  conv_kernel<KT><<<grid, kThreads, 0, stream>>>(y, rows, bcx, weight, bias, taps, cache.block_size, cache.head_dim,
                                                 rb, meta);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace

void short_conv(float* y, const float* bcx, const PagedKvView& cache, const float* weight, const float* bias,
                int64_t taps, const AttnMeta& meta, cudaStream_t stream) {
  if (meta.n_seqs <= 0 || meta.max_q <= 0) return;
  switch (cache.type) {
    case KvType::f32: launch<kF32>(y, bcx, cache, weight, bias, taps, meta, stream); return;
    case KvType::f16: launch<kF16>(y, bcx, cache, weight, bias, taps, meta, stream); return;
    case KvType::bf16: launch<kBf16>(y, bcx, cache, weight, bias, taps, meta, stream); return;
    case KvType::q8_0: launch<kQ8>(y, bcx, cache, weight, bias, taps, meta, stream); return;
  }
  throw Error(Errc::invalid_argument, "cuda short_conv: unknown KV cache type");
}

}  // namespace troupe::cuda
