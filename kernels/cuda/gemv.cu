// The weight-only dequantizing GEMV for decode steps (n_tokens <= 8): one
// warp per output row streams the row once, in 16-byte (bf16/f16/f32) or
// whole-block (q8_0/q4_0/q4_1; q5_0/q5_1 and the k-quants, 32 weights)
// chunks per lane, dequantizes in registers,
// multiplies with every token's f32 activations and reduces by warp
// shuffles. Weights are read exactly once per step; activations are small
// and stay in L1/L2, though a lane's 32-weight chunk makes its activation
// reads uncoalesced (gemv_staged.cu stages them for the block types). One
// launch may cover up to three matrices of one input (gemv_n: q, k, v).
// Also: dequantizing rows to bf16 for the prefill GEMMs.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/gemv_loaders.cuh"
#include "kernels/cuda/launchers.hpp"
#include "kernels/cuda/reduce.cuh"

namespace troupe::cuda {
namespace {

using namespace gemv_detail;  // the loaders, chunk_dot and accumulate, shared with gemv_staged.cu

constexpr int kGemvWarps = 4;  // output rows per block

// ---- kernels -----------------------------------------------------------

// The matrices of one launch: rows [end[i - 1], end[i]) of the launch are
// matrix i's (end[-1] = 0). One matrix for gemv(); q, k, v (or gate, up)
// for gemv_n(), which the op recorder fuses (ops.cpp).
struct GemvMats {
  float* y[kGemvMaxMats];
  const unsigned char* w[kGemvMaxMats];
  int64_t end[kGemvMaxMats];
  int n;
};

// Element i of a kernel-parameter array by selects: indexing it with a
// run-time i would copy the parameters to local memory.
template <class T>
__device__ __forceinline__ T pick(const T (&a)[kGemvMaxMats], int i) {
  static_assert(kGemvMaxMats == 3, "pick() selects among three");
  return i == 0 ? a[0] : i == 1 ? a[1] : a[2];
}

// MaxT: the most tokens the launch may carry (1 or kGemvMaxTokens); single-
// token decode gets fewer registers, so more warps and more bytes in flight.
// Multi: m may hold several matrices (a fused launch); without it only m's
// first, whose fields then stay kernel parameters rather than registers.
template <class L, int MaxT, bool Multi>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(GemvMats m, const float* __restrict__ x,
                                                               int n_tokens, int64_t n_in, int64_t row_bytes) {
  // Chunks each lane loads before using any: enough bytes outstanding per
  // warp to cover HBM latency.
  constexpr int kUnroll = (L::kChunk == 8 && MaxT == 1) ? 4 : 2;
  const int lane = threadIdx.x & 31;
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kGemvWarps + (threadIdx.x >> 5);
  if (o >= (Multi ? pick(m.end, m.n - 1) : m.end[0])) return;  // the whole warp leaves together
  // Matrix mi, its row o - first. Worked out again for the stores below, so
  // that nothing of it but the row pointer stays live through the loop.
  auto matrix_of = [&m](int64_t row_o, int64_t& first) {
    const int mi = (m.n > 1 && row_o >= m.end[0]) + (m.n > 2 && row_o >= m.end[1]);
    first = mi == 0 ? 0 : pick(m.end, mi - 1);
    return mi;
  };
  int64_t first = 0;
  int mi = 0;
  if constexpr (Multi) mi = matrix_of(o, first);
  const unsigned char* __restrict__ row = (Multi ? pick(m.w, mi) : m.w[0]) + (o - first) * row_bytes;
  const int64_t n_chunks = n_in / L::kChunk;
  float acc[MaxT];
#pragma unroll
  for (int t = 0; t < MaxT; ++t) acc[t] = 0.0f;

  int64_t c = lane;
  for (; c + 32 * (kUnroll - 1) < n_chunks; c += 32 * kUnroll) {
    float wv[kUnroll][L::kChunk];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) L::load(row, c + 32 * u, wv[u]);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      accumulate<L::kChunk, MaxT>(acc, wv[u], x, n_in, n_tokens, (c + 32 * u) * L::kChunk);
    }
  }
  for (; c < n_chunks; c += 32) {
    float wv[L::kChunk];
    L::load(row, c, wv);
    accumulate<L::kChunk, MaxT>(acc, wv, x, n_in, n_tokens, c * L::kChunk);
  }
  if constexpr (Multi) mi = matrix_of(o, first);
  float* __restrict__ y = Multi ? pick(m.y, mi) : m.y[0];
  const int64_t n_out = (Multi ? pick(m.end, mi) : m.end[0]) - first;
#pragma unroll
  for (int t = 0; t < MaxT; ++t) {
    if (t < n_tokens) {
      const float s = warp_sum(acc[t]);
      if (lane == 0) y[t * n_out + (o - first)] = s;
    }
  }
}

// The block types of block_decode.hpp: a thread decodes one 32-weight chunk.
// grid.y walks rows (strided past 65535), grid.x the chunks of a row.
__global__ void dequantize_chunks_kernel(__nv_bfloat16* __restrict__ y, const unsigned char* __restrict__ w,
                                         DType type, int64_t n_rows, int64_t n_in, int64_t row_bytes) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n_in / kQK) return;
  for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) {
    float v[kQK];
    decode_block_chunk(w + r * row_bytes, type, c, v);
#pragma unroll
    for (int l = 0; l < kQK; ++l) y[r * n_in + c * kQK + l] = __float2bfloat16_rn(v[l]);
  }
}

// grid.y walks rows (strided past 65535), grid.x the elements of a row.
__global__ void dequantize_rows_kernel(__nv_bfloat16* __restrict__ y, const unsigned char* __restrict__ w, DType type,
                                       int64_t n_rows, int64_t n_in, int64_t row_bytes) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_in) return;
  for (int64_t r = blockIdx.y; r < n_rows; r += gridDim.y) {
    y[r * n_in + i] = __float2bfloat16_rn(load_element(w + r * row_bytes, type, i));
  }
}

// ---- launchers ---------------------------------------------------------

int64_t chunk_of(DType t) { return is_quantized(t) ? kQK : 8; }

bool aligned(const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

template <class L, bool Multi>
void launch_gemv(const GemvMats& m, const float* x, int64_t n_tokens, int64_t n_in, int64_t row_bytes,
                 cudaStream_t stream) {
  const int64_t rows = m.end[m.n - 1];
  const auto blocks = static_cast<unsigned>((rows + kGemvWarps - 1) / kGemvWarps);
  if (n_tokens == 1) {
    gemv_kernel<L, 1, Multi><<<blocks, kGemvWarps * 32, 0, stream>>>(m, x, 1, n_in, row_bytes);
  } else {
    gemv_kernel<L, kGemvMaxTokens, Multi>
        <<<blocks, kGemvWarps * 32, 0, stream>>>(m, x, static_cast<int>(n_tokens), n_in, row_bytes);
  }
  TROUPE_CUDA_CHECK_LAUNCH();
}

template <class L>
void launch_gemv(const GemvMats& m, const float* x, int64_t n_tokens, int64_t n_in, int64_t row_bytes,
                 cudaStream_t stream) {
  if (m.n == 1) return launch_gemv<L, false>(m, x, n_tokens, n_in, row_bytes, stream);
  launch_gemv<L, true>(m, x, n_tokens, n_in, row_bytes, stream);
}

void launch_by_type(const GemvMats& m, const float* x, DType type, int64_t n_tokens, int64_t n_in,
                    cudaStream_t stream) {
  const int64_t rb = row_bytes(type, n_in);
  with_loader(type, [&](auto loader) { launch_gemv<decltype(loader)>(m, x, n_tokens, n_in, rb, stream); });
}

[[noreturn]] void refuse(const char* fn, DType type, int64_t n_tokens, int64_t n_in, int64_t n_out) {
  throw Error(Errc::invalid_argument,
              std::string("cuda ") + fn + ": unsupported operands (" + std::string(dtype_name(type)) +
                  " n_tokens=" + std::to_string(n_tokens) + " n_in=" + std::to_string(n_in) + " n_out=" +
                  std::to_string(n_out) + "): needs 1..8 tokens, whole chunks per row and aligned pointers");
}

constexpr int64_t kMaxGemvRows = int64_t{0x7fffffff} * kGemvWarps;  // grid.x limit

}  // namespace

bool gemv_supported(const void* w, DType type, const float* x, int64_t n_tokens, int64_t n_in) {
  if (n_tokens < 1 || n_tokens > kGemvMaxTokens || n_in <= 0 || n_in % chunk_of(type) != 0) return false;
  if (!aligned(x, 16)) return false;
  switch (type) {
    case DType::f32: case DType::f16: case DType::bf16: return aligned(w, 16);
    case DType::q8_0: case DType::q4_0: return aligned(w, 2);
    case DType::q4_1: return aligned(w, 4);
    case DType::q5_0: case DType::q5_1: case DType::q2_K: case DType::q3_K: case DType::q4_K: case DType::q5_K:
    case DType::q6_K: case DType::iq4_nl: case DType::iq4_xs: case DType::mxfp4:
      return n_in % dtype_info(type).block_size == 0;  // byte reads: any alignment
  }
  return false;
}

void gemv(float* y, const float* x, const void* w, DType type, int64_t n_tokens, int64_t n_in, int64_t n_out,
          cudaStream_t stream) {
  if (n_out <= 0 || n_out > kMaxGemvRows || !gemv_supported(w, type, x, n_tokens, n_in)) {
    refuse("gemv", type, n_tokens, n_in, n_out);
  }
  const GemvMats m{.y = {y, nullptr, nullptr}, .w = {static_cast<const unsigned char*>(w), nullptr, nullptr},
                   .end = {n_out, 0, 0}, .n = 1};
  launch_by_type(m, x, type, n_tokens, n_in, stream);
}

void gemv_n(float* const* y, const float* x, const void* const* w, const int64_t* n_out, int n, DType type,
            int64_t n_tokens, int64_t n_in, cudaStream_t stream) {
  if (n < 1 || n > kGemvMaxMats) {
    throw Error(Errc::invalid_argument, "cuda gemv_n: " + std::to_string(n) + " matrices, not 1 to " +
                                            std::to_string(kGemvMaxMats));
  }
  GemvMats m{};
  m.n = n;
  int64_t rows = 0;
  for (int i = 0; i < n; ++i) {
    if (n_out[i] <= 0 || n_out[i] > kMaxGemvRows - rows || !gemv_supported(w[i], type, x, n_tokens, n_in)) {
      refuse("gemv_n", type, n_tokens, n_in, n_out[i]);
    }
    rows += n_out[i];
    m.y[i] = y[i];
    m.w[i] = static_cast<const unsigned char*>(w[i]);
    m.end[i] = rows;
  }
  launch_by_type(m, x, type, n_tokens, n_in, stream);
}

void dequantize_rows_bf16(uint16_t* y, const void* w, DType type, int64_t n_rows, int64_t n_in, cudaStream_t stream) {
  if (n_rows < 0 || n_in <= 0) {
    throw Error(Errc::invalid_argument, "cuda dequantize_rows_bf16: bad shape n_rows=" + std::to_string(n_rows) +
                                            " n_in=" + std::to_string(n_in));
  }
  if (n_rows == 0) return;
  const int64_t rb = row_bytes(type, n_in);
  constexpr int kThreads = 256;
  const auto grid_rows = static_cast<unsigned>(n_rows < 65535 ? n_rows : 65535);
  auto* yb = reinterpret_cast<__nv_bfloat16*>(y);
  const auto* wb = static_cast<const unsigned char*>(w);
  if (decodes_blocks(type)) {
    const dim3 grid(static_cast<unsigned>((n_in / kQK + kThreads - 1) / kThreads), grid_rows);
    dequantize_chunks_kernel<<<grid, kThreads, 0, stream>>>(yb, wb, type, n_rows, n_in, rb);
  } else {
    const dim3 grid(static_cast<unsigned>((n_in + kThreads - 1) / kThreads), grid_rows);
    dequantize_rows_kernel<<<grid, kThreads, 0, stream>>>(yb, wb, type, n_rows, n_in, rb);
  }
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda
