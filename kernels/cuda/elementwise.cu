// Elementwise CUDA kernels: residual add, bias, SwiGLU, GELU, row gather,
// embedding lookup, f32 -> 16-bit conversion, and device-side fills for
// benchmarks. All are memory-bound: one grid-stride loop each.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/dequant.cuh"
#include "kernels/cuda/launchers.hpp"

namespace troupe::cuda {
namespace {

constexpr int kThreads = 256;

// ---- kernels -----------------------------------------------------------

__global__ void add_kernel(float* __restrict__ y, const float* __restrict__ x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] += x[i];
  }
}

__global__ void add_bias_kernel(float* __restrict__ y, const float* __restrict__ bias, int64_t n_rows,
                                int64_t n_cols) {
  const int64_t n = n_rows * n_cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] += bias[i % n_cols];
  }
}

// y may alias gate (the model writes the result over it), so no __restrict__.
__global__ void swiglu_kernel(float* y, const float* gate, const float* up, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = gate[i];
    y[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

// y may alias gate, as in swiglu_kernel.
__global__ void swiglu_oai_kernel(float* y, const float* gate, const float* up, int64_t n, float alpha, float limit) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = fminf(gate[i], limit);
    const float u = fminf(fmaxf(up[i], -limit), limit);
    y[i] = (u + 1.0f) * (g / (1.0f + expf(-alpha * g)));
  }
}

__device__ float gelu_tanh(float v) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * v * (1.0f + tanhf(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
}

__global__ void gelu_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = gelu_tanh(x[i]);
  }
}

// erff to a few ulp: torch's exact "gelu".
__global__ void gelu_erf_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
  }
}

__global__ void relu_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = fmaxf(x[i], 0.0f);
  }
}

// CLIP's quick GELU, x * sigmoid(1.702 x); y may alias x.
__global__ void quick_gelu_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    y[i] = v / (1.0f + expf(-1.702f * v));
  }
}

// y may alias x.
__global__ void xielu_kernel(float* y, const float* x, int64_t n, float alpha_p, float alpha_n, float beta, float eps) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    y[i] = v > 0.0f ? alpha_p * v * v + beta * v : (expm1f(fminf(v, eps)) - v) * alpha_n + beta * v;
  }
}

// y may alias gate, as in swiglu_kernel. erf: the exact GELU (ModernBERT's).
__global__ void geglu_kernel(float* y, const float* gate, const float* up, int64_t n, bool erf) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = gate[i];
    y[i] = (erf ? 0.5f * g * (1.0f + erff(g * 0.70710678118654752f)) : gelu_tanh(g)) * up[i];
  }
}

__global__ void scale_kernel(float* x, float s, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    x[i] *= s;
  }
}

__global__ void soft_cap_kernel(float* x, float cap, int64_t n) {
  const float inv = 1.0f / cap;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = cap * tanhf(x[i] * inv);
  }
}

__global__ void sigmoid_gate_kernel(float* __restrict__ y, const float* __restrict__ gate, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] /= 1.0f + expf(-gate[i]);
  }
}

// One block per output row.
__global__ void gather_rows_kernel(float* __restrict__ y, const float* __restrict__ x, const int32_t* __restrict__ rows,
                                   int64_t n_cols) {
  const float* src = x + static_cast<int64_t>(rows[blockIdx.x]) * n_cols;
  float* dst = y + static_cast<int64_t>(blockIdx.x) * n_cols;
  for (int64_t c = threadIdx.x; c < n_cols; c += blockDim.x) dst[c] = src[c];
}

// One block per token.
__global__ void embedding_kernel(float* __restrict__ y, const unsigned char* __restrict__ table, DType type,
                                 int64_t row_bytes, const int32_t* __restrict__ ids, int64_t n_embd) {
  const unsigned char* row = table + static_cast<int64_t>(ids[blockIdx.x]) * row_bytes;
  float* dst = y + static_cast<int64_t>(blockIdx.x) * n_embd;
  for (int64_t i = threadIdx.x; i < n_embd; i += blockDim.x) dst[i] = load_element(row, type, i);
}

__global__ void to_bf16_kernel(__nv_bfloat16* __restrict__ y, const float* __restrict__ x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = __float2bfloat16_rn(x[i]);
  }
}

__global__ void to_f16_kernel(__half* __restrict__ y, const float* __restrict__ x, int64_t n) {
  constexpr float kMax = 65504.0f;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    // Comparisons rather than fminf/fmaxf so a NaN stays NaN.
    y[i] = __float2half_rn(v > kMax ? kMax : (v < -kMax ? -kMax : v));
  }
}

// splitmix64: a counter-based generator, so every element is independent of
// the launch shape.
__device__ __forceinline__ float hash_uniform(uint64_t seed, int64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(i) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
}

__global__ void fill_random_kernel(void* y, DType type, int64_t n, float scale, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = (2.0f * hash_uniform(seed, i) - 1.0f) * scale;
    if (type == DType::f32) {
      static_cast<float*>(y)[i] = v;
    } else if (type == DType::f16) {
      static_cast<__half*>(y)[i] = __float2half_rn(v);
    } else {
      static_cast<__nv_bfloat16*>(y)[i] = __float2bfloat16_rn(v);
    }
  }
}

// 16-byte loads and stores: what a bandwidth measurement should use.
__global__ void copy4_kernel(float4* __restrict__ y, const float4* __restrict__ x, int64_t n4) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n4; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = x[i];
  }
}

__global__ void fill_kernel(float* y, float value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = value;
  }
}

// ---- launchers ---------------------------------------------------------

// Enough blocks to cover n once, capped so huge arrays loop (grid-stride).
unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::min<int64_t>(b, 65535 * 8));
}

void check_len(const char* fn, int64_t n) {
  if (n < 0) throw Error(Errc::invalid_argument, std::string("cuda ") + fn + ": negative length " + std::to_string(n));
}

}  // namespace

void add(float* y, const float* x, int64_t n, cudaStream_t stream) {
  check_len("add", n);
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, x, n);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void add_bias(float* y, const float* bias, int64_t n_rows, int64_t n_cols, cudaStream_t stream) {
  if (n_rows < 0 || n_cols <= 0) {
    throw Error(Errc::invalid_argument, "cuda add_bias: bad shape n_rows=" + std::to_string(n_rows) +
                                            " n_cols=" + std::to_string(n_cols));
  }
  if (n_rows == 0) return;
  add_bias_kernel<<<blocks_for(n_rows * n_cols), kThreads, 0, stream>>>(y, bias, n_rows, n_cols);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void swiglu(float* y, const float* gate, const float* up, int64_t n, cudaStream_t stream) {
  check_len("swiglu", n);
  if (n == 0) return;
  swiglu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, gate, up, n);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void gelu(float* y, const float* x, int64_t n, cudaStream_t stream) {
  check_len("gelu", n);
  if (n == 0) return;
  gelu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, x, n);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void gelu_erf(float* y, const float* x, int64_t n, cudaStream_t stream) {
  check_len("gelu_erf", n);
  if (n == 0) return;
  gelu_erf_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, x, n);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void relu(float* y, const float* x, int64_t n, cudaStream_t stream) {
  check_len("relu", n);
  if (n == 0) return;
  relu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, x, n);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void quick_gelu(float* y, const float* x, int64_t n, cudaStream_t stream) {
  check_len("quick_gelu", n);
  if (n == 0) return;
  quick_gelu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, x, n);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void xielu(float* y, const float* x, int64_t n, float alpha_p, float alpha_n, float beta, float eps,
           cudaStream_t stream) {
  check_len("xielu", n);
  if (n == 0) return;
  xielu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, x, n, alpha_p, alpha_n, beta, eps);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void geglu(float* y, const float* gate, const float* up, int64_t n, bool erf, cudaStream_t stream) {
  check_len("geglu", n);
  if (n == 0) return;
  geglu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, gate, up, n, erf);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void swiglu_oai(float* y, const float* gate, const float* up, int64_t n, float alpha, float limit,
                cudaStream_t stream) {
  check_len("swiglu_oai", n);
  if (n == 0) return;
  swiglu_oai_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, gate, up, n, alpha, limit);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void scale(float* x, float s, int64_t n, cudaStream_t stream) {
  check_len("scale", n);
  if (n == 0) return;
  scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, s, n);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void soft_cap(float* x, float cap, int64_t n, cudaStream_t stream) {
  check_len("soft_cap", n);
  if (n == 0) return;
  soft_cap_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, cap, n);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void sigmoid_gate(float* y, const float* gate, int64_t n, cudaStream_t stream) {
  check_len("sigmoid_gate", n);
  if (n == 0) return;
  sigmoid_gate_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, gate, n);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void gather_rows(float* y, const float* x, const int32_t* rows, int64_t n_rows, int64_t n_cols, cudaStream_t stream) {
  if (n_rows < 0 || n_rows > 0x7fffffff || n_cols <= 0) {
    throw Error(Errc::invalid_argument, "cuda gather_rows: bad shape n_rows=" + std::to_string(n_rows) +
                                            " n_cols=" + std::to_string(n_cols));
  }
  if (n_rows == 0) return;
  gather_rows_kernel<<<static_cast<unsigned>(n_rows), kThreads, 0, stream>>>(y, x, rows, n_cols);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void embedding(float* y, const void* table, DType type, const int32_t* ids, int64_t n_tokens, int64_t n_embd,
               cudaStream_t stream) {
  if (n_tokens < 0 || n_tokens > 0x7fffffff || n_embd <= 0) {
    throw Error(Errc::invalid_argument, "cuda embedding: bad shape n_tokens=" + std::to_string(n_tokens) +
                                            " n_embd=" + std::to_string(n_embd));
  }
  if (n_tokens == 0) return;
  const int64_t stride = row_bytes(type, n_embd);  // throws unless n_embd is whole blocks
  embedding_kernel<<<static_cast<unsigned>(n_tokens), kThreads, 0, stream>>>(
      y, static_cast<const unsigned char*>(table), type, stride, ids, n_embd);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void convert_f32(void* y, DType to, const float* x, int64_t n, cudaStream_t stream) {
  check_len("convert_f32", n);
  if (to != DType::bf16 && to != DType::f16) {
    throw Error(Errc::unsupported, "cuda convert_f32: target must be bf16 or f16, not " + std::string(dtype_name(to)));
  }
  if (n == 0) return;
  if (to == DType::bf16) {
    to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(y), x, n);
  } else {
    to_f16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<__half*>(y), x, n);
  }
  TROUPE_CUDA_CHECK_LAUNCH();
}

void fill_random(void* y, DType type, int64_t n, float scale, uint64_t seed, cudaStream_t stream) {
  check_len("fill_random", n);
  if (type != DType::f32 && type != DType::f16 && type != DType::bf16) {
    throw Error(Errc::unsupported, "cuda fill_random: type must be f32, f16 or bf16, not " +
                                       std::string(dtype_name(type)));
  }
  if (n == 0) return;
  fill_random_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, type, n, scale, seed);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void copy_floats(float* y, const float* x, int64_t n, cudaStream_t stream) {
  check_len("copy_floats", n);
  if (n % 4 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(y) % 16 != 0) {
    throw Error(Errc::invalid_argument, "cuda copy_floats: needs 16-byte aligned buffers and a multiple of 4 floats");
  }
  if (n == 0) return;
  copy4_kernel<<<blocks_for(n / 4), kThreads, 0, stream>>>(reinterpret_cast<float4*>(y),
                                                            reinterpret_cast<const float4*>(x), n / 4);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void fill(float* y, float value, int64_t n, cudaStream_t stream) {
  check_len("fill", n);
  if (n == 0) return;
  fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, value, n);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda
