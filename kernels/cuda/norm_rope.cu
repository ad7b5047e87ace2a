// Row normalizations (RMSNorm, the residual add fused with RMSNorm,
// LayerNorm) and rotary position embedding for Q and K in one pass.
// A norm is one block per token row, reduced by warp shuffles; each thread
// touches the same elements in every phase, so in-place use is safe.
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launchers.hpp"
#include "kernels/cuda/reduce.cuh"

namespace troupe::cuda {
namespace {

constexpr int kNormThreads = 256;
constexpr int kRopeThreads = 128;

// ---- kernels -----------------------------------------------------------

__global__ void rmsnorm_kernel(float* y, const float* x, const float* __restrict__ w, int64_t n_embd, float eps) {
  const float* xr = x + blockIdx.x * n_embd;
  float* yr = y + blockIdx.x * n_embd;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < n_embd; i += blockDim.x) ss += xr[i] * xr[i];
  const float mean_sq = block_sum(ss) / static_cast<float>(n_embd);
  const float inv = 1.0f / sqrtf(mean_sq + eps);
  for (int64_t i = threadIdx.x; i < n_embd; i += blockDim.x) yr[i] = xr[i] * inv * w[i];
}

__global__ void add_rmsnorm_kernel(float* y, float* x, const float* r, const float* __restrict__ w, int64_t n_embd,
                                   float eps) {
  float* xr = x + blockIdx.x * n_embd;
  const float* rr = r + blockIdx.x * n_embd;
  float* yr = y + blockIdx.x * n_embd;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < n_embd; i += blockDim.x) {
    const float v = xr[i] + rr[i];
    xr[i] = v;
    ss += v * v;
  }
  const float mean_sq = block_sum(ss) / static_cast<float>(n_embd);
  const float inv = 1.0f / sqrtf(mean_sq + eps);
  for (int64_t i = threadIdx.x; i < n_embd; i += blockDim.x) yr[i] = xr[i] * inv * w[i];
}

// Two passes (mean, then squared deviations) as on the CPU: E[x^2] - E[x]^2
// cancels badly when the mean is large against the spread.
__global__ void layernorm_kernel(float* y, const float* x, const float* __restrict__ w, const float* __restrict__ b,
                                 int64_t n_embd, float eps) {
  const float* xr = x + blockIdx.x * n_embd;
  float* yr = y + blockIdx.x * n_embd;
  const float inv_n = 1.0f / static_cast<float>(n_embd);
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n_embd; i += blockDim.x) s += xr[i];
  const float mean = block_sum(s) * inv_n;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < n_embd; i += blockDim.x) {
    const float d = xr[i] - mean;
    ss += d * d;
  }
  const float inv = 1.0f / sqrtf(block_sum(ss) * inv_n + eps);
  for (int64_t i = threadIdx.x; i < n_embd; i += blockDim.x) {
    const float v = (xr[i] - mean) * inv * w[i];
    yr[i] = b != nullptr ? v + b[i] : v;
  }
}

__device__ __forceinline__ void rotate_heads(float* x, int64_t n_head, int64_t head_dim, int64_t a_off,
                                             int64_t b_off, float c, float s) {
  for (int64_t h = 0; h < n_head; ++h) {
    float* xh = x + h * head_dim;
    const float x0 = xh[a_off];
    const float x1 = xh[b_off];
    xh[a_off] = x0 * c - x1 * s;
    xh[b_off] = x0 * s + x1 * c;
  }
}

// One thread per (token, rotated pair): the angle in double (positions in the
// hundreds of thousands keep their precision), then every head of q and k.
__global__ void rope_qk_kernel(float* q, float* k, const int32_t* __restrict__ pos, int64_t n_tokens, int64_t n_head,
                               int64_t n_head_kv, int64_t head_dim, int64_t half, bool neox, double freq_scale,
                               double mscale, const double* __restrict__ inv_freq) {
  const int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (idx >= n_tokens * half) return;
  const int64_t t = idx / half;
  const int64_t i = idx % half;
  const double angle = static_cast<double>(pos[t]) * freq_scale * inv_freq[i];
  double sd, cd;
  sincos(angle, &sd, &cd);
  const float c = static_cast<float>(cd * mscale);
  const float s = static_cast<float>(sd * mscale);
  const int64_t a_off = neox ? i : 2 * i;
  const int64_t b_off = neox ? i + half : 2 * i + 1;
  rotate_heads(q + t * n_head * head_dim, n_head, head_dim, a_off, b_off, c, s);
  if (k != nullptr) rotate_heads(k + t * n_head_kv * head_dim, n_head_kv, head_dim, a_off, b_off, c, s);
}

// ---- launchers ---------------------------------------------------------

void check_norm(const char* fn, int64_t n_tokens, int64_t n_embd) {
  if (n_tokens < 0 || n_tokens > 0x7fffffff || n_embd <= 0) {
    throw Error(Errc::invalid_argument, std::string("cuda ") + fn + ": bad shape n_tokens=" +
                                            std::to_string(n_tokens) + " n_embd=" + std::to_string(n_embd));
  }
}

}  // namespace

void rmsnorm(float* y, const float* x, const float* weight, int64_t n_tokens, int64_t n_embd, float eps,
             cudaStream_t stream) {
  check_norm("rmsnorm", n_tokens, n_embd);
  if (n_tokens == 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(n_tokens), kNormThreads, 0, stream>>>(y, x, weight, n_embd, eps);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void add_rmsnorm(float* y, float* x, const float* r, const float* weight, int64_t n_tokens, int64_t n_embd, float eps,
                 cudaStream_t stream) {
  check_norm("add_rmsnorm", n_tokens, n_embd);
  if (n_tokens == 0) return;
  add_rmsnorm_kernel<<<static_cast<unsigned>(n_tokens), kNormThreads, 0, stream>>>(y, x, r, weight, n_embd, eps);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void layernorm(float* y, const float* x, const float* weight, const float* bias, int64_t n_tokens, int64_t n_embd,
               float eps, cudaStream_t stream) {
  check_norm("layernorm", n_tokens, n_embd);
  if (n_tokens == 0) return;
  layernorm_kernel<<<static_cast<unsigned>(n_tokens), kNormThreads, 0, stream>>>(y, x, weight, bias, n_embd, eps);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void rope_qk(float* q, float* k, const int32_t* pos, int64_t n_tokens, int64_t n_head, int64_t n_head_kv,
             int64_t head_dim, const RopeArgs& args, cudaStream_t stream) {
  if (n_tokens < 0 || n_head <= 0 || head_dim <= 0 || args.n_rot <= 0 || args.n_rot > head_dim ||
      args.n_rot % 2 != 0 || (k != nullptr && n_head_kv <= 0) || args.inv_freq == nullptr) {
    throw Error(Errc::invalid_argument, "cuda rope_qk: bad shape n_tokens=" + std::to_string(n_tokens) + " n_head=" +
                                            std::to_string(n_head) + " n_head_kv=" + std::to_string(n_head_kv) +
                                            " head_dim=" + std::to_string(head_dim) +
                                            " n_rot=" + std::to_string(args.n_rot) + " (or no frequency table)");
  }
  if (n_tokens == 0) return;
  const int64_t half = args.n_rot / 2;
  const int64_t n = n_tokens * half;
  const auto blocks = static_cast<unsigned>((n + kRopeThreads - 1) / kRopeThreads);
  rope_qk_kernel<<<blocks, kRopeThreads, 0, stream>>>(q, k, pos, n_tokens, n_head, n_head_kv, head_dim, half,
                                                      args.neox, args.freq_scale, args.mscale,
                                                      args.inv_freq);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda
