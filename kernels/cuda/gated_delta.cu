// The recurrent layers on the device, over per-sequence state slots as on
// the CPU (kernels/cpu/gated_delta.cpp says why there is a state): Qwen3-Next
// and Qwen3.5's Gated DeltaNet (CudaBackend::gated_delta_net) and Granite
// 4.0-H's Mamba-2 scan (CudaBackend::mamba2_scan), which share the conv.
//
// The DeltaNet: two launches on the stream. The conv: a thread per (sequence, channel)
// slides its window over the sequence's new tokens, from the slot's
// history, writes SiLU of each output over its input and the last inputs
// back to the slot. The rule: a block per (value head, sequence) runs the
// tokens in order; each warp owns rows of the head's [v_dim, k_dim] state
// (its lanes across a row, so reads are coalesced) and takes both of a
// row's products with k and q in one pass before updating it:
// gate * S_d + delta * k has products gate * (S_d . x) + delta * (k . x).
//
// Mamba-2: the same conv over proj's x B C columns, a block per (head,
// sequence) whose threads own rows of the head's [head_dim, d_state] state
// (B and C of each token staged in shared memory), then a block per (group,
// token row) for the gated RMSNorm.
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launchers.hpp"

namespace troupe::cuda {
namespace {

constexpr int kConvThreads = 128;
constexpr int kRuleWarps = 4;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// Grid (channel blocks, sequences). Channel ch of token row r is
// x[r * stride + offset + ch]; its history row k at hist[k * conv_dim].
__global__ void causal_conv_kernel(float* __restrict__ x, int64_t stride, int64_t offset, float* __restrict__ state,
                                   int64_t state_floats, const float* __restrict__ conv_w,
                                   const float* __restrict__ conv_b, int64_t conv_dim, int taps, AttnMeta meta) {
  const DevSeq s = meta.seqs[blockIdx.y];
  const int64_t ch = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (ch >= conv_dim || s.n_q == 0) return;
  float* hist = state + int64_t{s.state_slot} * state_floats + ch;
  const int h = taps - 1;
  float win[kGdnMaxTaps];  // inputs t - h .. t
  float w[kGdnMaxTaps];
  for (int k = 0; k < h; ++k) win[k] = s.n_past == 0 ? 0.0f : hist[k * conv_dim];
  for (int k = 0; k < taps; ++k) w[k] = conv_w[ch * taps + k];
  const float bias = conv_b != nullptr ? conv_b[ch] : 0.0f;
  float* xs = x + int64_t{s.q_begin} * stride + offset + ch;
  for (int t = 0; t < s.n_q; ++t) {
    win[h] = xs[t * stride];
    float acc = bias;
    for (int k = 0; k < taps; ++k) acc += w[k] * win[k];
    xs[t * stride] = acc / (1.0f + expf(-acc));
    for (int k = 0; k < h; ++k) win[k] = win[k + 1];
  }
  for (int k = 0; k < h; ++k) hist[k * conv_dim] = win[k];
}

// Grid (heads, sequences): each thread owns rows p of the head's
// [head_dim, d_state] state; the token's B and C are staged in shared memory.
__global__ void mamba2_scan_kernel(Mamba2Args g, AttnMeta meta) {
  const DevSeq s = meta.seqs[blockIdx.y];
  if (s.n_q == 0) return;
  const int64_t h = blockIdx.x;
  const int64_t inner = g.n_heads * g.head_dim;
  const int64_t conv_dim = inner + 2 * g.n_groups * g.d_state;
  const int64_t width = inner + conv_dim + g.n_heads;
  const int64_t grp = h / (g.n_heads / g.n_groups);
  float* H = g.state + int64_t{s.state_slot} * g.state_floats + (g.taps - 1) * conv_dim + h * g.head_dim * g.d_state;
  extern __shared__ float bc[];  // [2, d_state]: B then C
  if (s.n_past == 0) {
    for (int64_t i = threadIdx.x; i < g.head_dim * g.d_state; i += blockDim.x) H[i] = 0.0f;
  }
  for (int t = 0; t < s.n_q; ++t) {
    const int64_t row = int64_t{s.q_begin} + t;
    const float* r = g.proj + row * width;
    __syncthreads();  // the previous token's B and C are read
    for (int64_t n = threadIdx.x; n < g.d_state; n += blockDim.x) {
      bc[n] = r[2 * inner + grp * g.d_state + n];
      bc[g.d_state + n] = r[2 * inner + g.n_groups * g.d_state + grp * g.d_state + n];
    }
    __syncthreads();
    const float dt = softplus(r[inner + conv_dim + h] + g.dt_bias[h]);
    const float decay = expf(dt * g.a[h]);
    for (int64_t p = threadIdx.x; p < g.head_dim; p += blockDim.x) {
      const float x = r[inner + h * g.head_dim + p];
      const float u = dt * x;
      float* Hp = H + p * g.d_state;
      float out = 0.0f;
      for (int64_t n = 0; n < g.d_state; ++n) {
        const float v = decay * Hp[n] + u * bc[n];
        Hp[n] = v;
        out += v * bc[g.d_state + n];
      }
      g.y[row * inner + h * g.head_dim + p] = out + g.d[h] * x;
    }
  }
}

// Block (group, token row): y *= silu(z), then RMS-normed over the group
// and scaled by its weights.
__global__ void mamba2_norm_kernel(Mamba2Args g) {
  const int64_t inner = g.n_heads * g.head_dim;
  const int64_t width = inner + inner + 2 * g.n_groups * g.d_state + g.n_heads;
  const int64_t size = inner / g.n_groups;
  const int64_t row = blockIdx.y;
  float* y = g.y + row * inner + blockIdx.x * size;
  const float* z = g.proj + row * width + blockIdx.x * size;
  const float* w = g.norm + blockIdx.x * size;
  __shared__ float partial[32];
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < size; i += blockDim.x) {
    const float v = y[i] * (z[i] / (1.0f + expf(-z[i])));
    y[i] = v;
    ss += v * v;
  }
  ss = warp_sum(ss);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
  for (unsigned i = 0; i < blockDim.x / 32; ++i) total += partial[i];
  const float inv = rsqrtf(total / static_cast<float>(size) + g.norm_eps);
  for (int64_t i = threadIdx.x; i < size; i += blockDim.x) y[i] = y[i] * inv * w[i];
}

// Grid (value heads, sequences), kRuleWarps warps a block.
__global__ void gdn_rule_kernel(GdnArgs g, AttnMeta meta) {
  const DevSeq s = meta.seqs[blockIdx.y];
  if (s.n_q == 0) return;
  const int64_t h = blockIdx.x;
  const int64_t kh = g.tiled ? h % g.n_k_heads : h / (g.n_v_heads / g.n_k_heads);
  const int64_t key_dim = g.n_k_heads * g.k_dim;
  const int64_t conv_dim = 2 * key_dim + g.n_v_heads * g.v_dim;
  const int64_t hist = (g.taps - 1) * conv_dim;
  float* S = g.state + int64_t{s.state_slot} * g.state_floats + hist + h * g.v_dim * g.k_dim;  // [v_dim, k_dim]
  __shared__ float qn[kGdnMaxKeyDim];
  __shared__ float kn[kGdnMaxKeyDim];
  __shared__ float partial[2][kRuleWarps];
  __shared__ float scalars[4];  // q's scale, k's scale, beta, gate
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (s.n_past == 0) {
    for (int64_t i = threadIdx.x; i < g.v_dim * g.k_dim; i += blockDim.x) S[i] = 0.0f;
  }
  const float q_scale = rsqrtf(static_cast<float>(g.k_dim));
  for (int t = 0; t < s.n_q; ++t) {
    const int64_t row = int64_t{s.q_begin} + t;
    const float* x = g.qkv + row * conv_dim;
    float qq = 0.0f, kk = 0.0f;
    for (int64_t i = threadIdx.x; i < g.k_dim; i += blockDim.x) {
      const float qv = x[kh * g.k_dim + i];
      const float kv = x[key_dim + kh * g.k_dim + i];
      qn[i] = qv;
      kn[i] = kv;
      qq += qv * qv;
      kk += kv * kv;
    }
    qq = warp_sum(qq);
    kk = warp_sum(kk);
    if (lane == 0) {
      partial[0][warp] = qq;
      partial[1][warp] = kk;
    }
    __syncthreads();  // also orders the zeroed state before its first read
    if (threadIdx.x == 0) {
      float sq = 0.0f, sk = 0.0f;
      for (int w = 0; w < kRuleWarps; ++w) sq += partial[0][w], sk += partial[1][w];
      scalars[0] = q_scale * rsqrtf(sq + 1e-6f);
      scalars[1] = rsqrtf(sk + 1e-6f);
      scalars[2] = 1.0f / (1.0f + expf(-g.b[row * g.n_v_heads + h]));
      scalars[3] = expf(g.decay[h] * softplus(g.a[row * g.n_v_heads + h] + g.dt_bias[h]));
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < g.k_dim; i += blockDim.x) {
      qn[i] *= scalars[0];
      kn[i] *= scalars[1];
    }
    __syncthreads();
    const float beta = scalars[2];
    const float gate = scalars[3];
    float kq = 0.0f;
    for (int64_t i = lane; i < g.k_dim; i += 32) kq += kn[i] * qn[i];
    kq = warp_sum(kq);
    const float* v = x + 2 * key_dim + h * g.v_dim;
    float* o = g.out + (row * g.n_v_heads + h) * g.v_dim;
    for (int64_t d = warp; d < g.v_dim; d += kRuleWarps) {
      float* Sd = S + d * g.k_dim;
      float sk = 0.0f, sq = 0.0f;
      for (int64_t i = lane; i < g.k_dim; i += 32) {
        const float sv = Sd[i];
        sk += sv * kn[i];
        sq += sv * qn[i];
      }
      sk = warp_sum(sk);
      sq = warp_sum(sq);
      const float delta = (v[d] - gate * sk) * beta;
      if (lane == 0) o[d] = gate * sq + delta * kq;
      for (int64_t i = lane; i < g.k_dim; i += 32) Sd[i] = gate * Sd[i] + delta * kn[i];
    }
    __syncthreads();  // qn, kn and the scalars are the next token's
  }
}

}  // namespace

void gated_delta_net(const GdnArgs& g, const AttnMeta& meta, cudaStream_t stream) {
  if (meta.n_seqs <= 0 || meta.max_q <= 0) return;
  if (g.k_dim > kGdnMaxKeyDim || g.taps < 1 || g.taps > kGdnMaxTaps || g.n_k_heads <= 0 ||
      g.n_v_heads % g.n_k_heads != 0) {
    throw Error(Errc::invalid_argument, "cuda gated_delta_net: bad shape");
  }
  const int64_t conv_dim = 2 * g.n_k_heads * g.k_dim + g.n_v_heads * g.v_dim;
  const dim3 conv_grid(static_cast<unsigned>((conv_dim + kConvThreads - 1) / kConvThreads),
                       static_cast<unsigned>(meta.n_seqs));
  causal_conv_kernel<<<conv_grid, kConvThreads, 0, stream>>>(g.qkv, conv_dim, 0, g.state, g.state_floats, g.conv_w,
                                                             nullptr, conv_dim, static_cast<int>(g.taps), meta);
  TROUPE_CUDA_CHECK_LAUNCH();
  const dim3 rule_grid(static_cast<unsigned>(g.n_v_heads), static_cast<unsigned>(meta.n_seqs));
  gdn_rule_kernel<<<rule_grid, kRuleWarps * 32, 0, stream>>>(g, meta);
  TROUPE_CUDA_CHECK_LAUNCH();
}

void mamba2_scan(const Mamba2Args& g, const AttnMeta& meta, cudaStream_t stream) {
  if (meta.n_seqs <= 0 || meta.max_q <= 0) return;
  if (g.n_heads <= 0 || g.head_dim <= 0 || g.n_groups <= 0 || g.n_heads % g.n_groups != 0 || g.d_state <= 0 ||
      g.d_state > kMamba2MaxState || g.taps < 1 || g.taps > kGdnMaxTaps) {
    throw Error(Errc::invalid_argument, "cuda mamba2_scan: bad shape");
  }
  const int64_t inner = g.n_heads * g.head_dim;
  const int64_t conv_dim = inner + 2 * g.n_groups * g.d_state;
  const int64_t width = inner + conv_dim + g.n_heads;
  const dim3 conv_grid(static_cast<unsigned>((conv_dim + kConvThreads - 1) / kConvThreads),
                       static_cast<unsigned>(meta.n_seqs));
  causal_conv_kernel<<<conv_grid, kConvThreads, 0, stream>>>(g.proj, width, inner, g.state, g.state_floats, g.conv,
                                                             g.conv_bias, conv_dim, static_cast<int>(g.taps), meta);
  TROUPE_CUDA_CHECK_LAUNCH();
  const dim3 scan_grid(static_cast<unsigned>(g.n_heads), static_cast<unsigned>(meta.n_seqs));
  const size_t smem = static_cast<size_t>(2 * g.d_state) * sizeof(float);
  mamba2_scan_kernel<<<scan_grid, 128, smem, stream>>>(g, meta);
  TROUPE_CUDA_CHECK_LAUNCH();
  // Every row of the batch: the sequences' rows are 0 .. n_tokens - 1.
  const dim3 norm_grid(static_cast<unsigned>(g.n_groups), static_cast<unsigned>(g.n_tokens));
  mamba2_norm_kernel<<<norm_grid, 256, 0, stream>>>(g);
  TROUPE_CUDA_CHECK_LAUNCH();
}

}  // namespace troupe::cuda
