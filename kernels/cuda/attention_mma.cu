// Prefill attention on tensor cores (WMMA, sm_80+): the same tiles as the
// scalar kernel in attention.cu (32 queries of one sequence and one head a
// block, causal, sliding window, grouped-query), with both products on
// 16x16x16 tensor-core fragments and fp32 accumulation:
//
//   S[32, 64]  = Q[32, d] · K[64, d]^T        4 warps x 2 fragments
//   online softmax of S's rows in fp32       a warp owns 8 rows
//   O[32, d]  = O · diag(corr) + P[32, 64] · V[64, d]
//
// Operands are 16-bit: bf16 for a bf16 cache (its rows are then exact), f16
// for the others (f16 rows exact; f32 and q8_0 rows rounded once, as Q is
// after its scaling, and P). So the result differs from the scalar
// kernel's by the 16-bit rounding of Q, P and (f32/q8_0 caches) K and V;
// tests/cuda/attention_test.cpp holds it to that bound. O stays in shared
// memory in fp32 between key tiles, since a WMMA accumulator's lanes do not
// map to rows in a way the per-row softmax rescale could use.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/launchers.hpp"
#include "kernels/cuda/reduce.cuh"

namespace troupe::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = kAttnTileQ;                 // queries a block (32)
constexpr int kKeys = 64;                         // keys a tile
constexpr int kFrag = 16;                         // WMMA fragment side
constexpr int kRowsPerWarp = kRows / kWarps;      // softmax rows a warp owns
constexpr int kLdS = kKeys + 4;                   // floats a score row
constexpr int kLdP = kKeys + 8;                   // 16-bit weights a P row
static_assert(kRows == 2 * kFrag && kKeys == 4 * kFrag && kWarps == 4, "the S split below assumes these");

// Shared-memory layout for head_dim d (a multiple of 16), in bytes. Row
// strides are padded (16-bit rows by 8 elements, f32 rows by 4) so that
// consecutive rows start in different banks; every fragment then starts
// 32-byte aligned, as WMMA loads and stores require.
struct MmaLayout {
  int64_t ldh;  // Q, K, V row stride, 16-bit elements
  int64_t ldo;  // O row stride, floats
  int64_t q, k, v, s, p, o, bytes;
};

__host__ __device__ constexpr MmaLayout mma_layout(int64_t d) {
  MmaLayout L{};
  L.ldh = d + 8;
  L.ldo = d + 4;
  L.q = 0;                            // [32][ldh] Q * scale
  L.k = L.q + kRows * L.ldh * 2;      // [64][ldh] keys of the tile
  L.v = L.k + kKeys * L.ldh * 2;      // [64][ldh] values of the tile
  L.s = L.v + kKeys * L.ldh * 2;      // [32][kLdS] scores, f32
  L.p = L.s + kRows * kLdS * 4;       // [32][kLdP] softmax weights
  L.o = L.p + kRows * kLdP * 2;       // [32][ldo] output accumulator, f32
  L.bytes = L.o + kRows * L.ldo * 4;
  return L;
}

template <class T>
__device__ __forceinline__ T to_16bit(float x);
template <>
__device__ __forceinline__ __half to_16bit<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 to_16bit<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Keys (or values) [k0, k0 + kKeys) of kv head kvh as 16-bit rows; rows at
// or past k_hi are zero (a zero V row keeps 0 * garbage out of P · V).
// Vec (rows 16-byte aligned, checked by the launcher): f16 and bf16 rows
// are copied 16 bytes at a time, as they are already the operand type; f32
// rows are read 16 bytes at a time and rounded. Otherwise (and for q8_0)
// one element per thread.
template <int KT, class T, bool Vec>
__device__ __forceinline__ void load_tile(T* tile, int64_t ldh, const unsigned char* __restrict__ cache,
                                          const int32_t* table, int64_t k0, int64_t k_hi, int64_t block_size,
                                          int64_t slot_stride, int64_t row_bytes, int64_t kvh, int64_t head_dim) {
  auto row_of = [&](int64_t t) {
    return cache + (static_cast<int64_t>(table[t / block_size]) * block_size + t % block_size) * slot_stride +
           kvh * row_bytes;
  };
  if constexpr (Vec && (KT == kF16 || KT == kBf16)) {
    const int64_t per_row = head_dim / 8;  // 16-byte pieces
    for (int64_t i = threadIdx.x; i < kKeys * per_row; i += kThreads) {
      const int64_t j = i / per_row, c = i % per_row;
      const int64_t t = k0 + j;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (t < k_hi) v = __ldg(reinterpret_cast<const uint4*>(row_of(t)) + c);
      *reinterpret_cast<uint4*>(tile + j * ldh + c * 8) = v;
    }
  } else if constexpr (Vec && KT == kF32) {
    const int64_t per_row = head_dim / 4;
    for (int64_t i = threadIdx.x; i < kKeys * per_row; i += kThreads) {
      const int64_t j = i / per_row, c = i % per_row;
      const int64_t t = k0 + j;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (t < k_hi) v = __ldg(reinterpret_cast<const float4*>(row_of(t)) + c);
      T* dst = tile + j * ldh + c * 4;
      dst[0] = to_16bit<T>(v.x);
      dst[1] = to_16bit<T>(v.y);
      dst[2] = to_16bit<T>(v.z);
      dst[3] = to_16bit<T>(v.w);
    }
  } else {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    for (int j = warp; j < kKeys; j += kWarps) {
      const int64_t t = k0 + j;
      T* dst = tile + j * ldh;
      if (t < k_hi) {
        const unsigned char* src = row_of(t);
        for (int64_t e = lane; e < head_dim; e += 32) dst[e] = to_16bit<T>(kv_load<KT>(src, e, head_dim));
      } else {
        for (int64_t e = lane; e < head_dim; e += 32) dst[e] = to_16bit<T>(0.0f);
      }
    }
  }
}

template <int KT, class T, bool Vec>
__global__ void __launch_bounds__(kThreads)
    attn_prefill_mma_kernel(float* __restrict__ out, const float* __restrict__ q, const unsigned char* __restrict__ kc,
                            const unsigned char* __restrict__ vc, int64_t block_size, int64_t n_head_kv,
                            int64_t head_dim, int64_t row_bytes, AttnMeta meta, int64_t n_head, float scale,
                            int32_t window, bool causal, float softcap, const float* __restrict__ sinks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // the host never launches it below sm_80 (attention_prefill_mma_supported)
#else
  extern __shared__ __align__(128) unsigned char mma_smem[];
  const MmaLayout L = mma_layout(head_dim);
  T* qs = reinterpret_cast<T*>(mma_smem + L.q);
  T* ks = reinterpret_cast<T*>(mma_smem + L.k);
  T* vs = reinterpret_cast<T*>(mma_smem + L.v);
  float* ss = reinterpret_cast<float*>(mma_smem + L.s);
  T* ps = reinterpret_cast<T*>(mma_smem + L.p);
  float* os = reinterpret_cast<float*>(mma_smem + L.o);
  const int64_t ldh = L.ldh;
  const int64_t ldo = L.ldo;

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const PrefillTile tile = prefill_tile(meta, n_head, n_head_kv, window, causal);
  const int64_t h = tile.head, kvh = tile.kv_head, first_row = tile.first_row;
  const int64_t pos0 = tile.pos0, k_lo = tile.k_lo, k_hi = tile.k_hi;
  const int nr = tile.n_rows;  // valid query rows of this tile
  const int32_t* table = tile.table;
  const int64_t slot_stride = n_head_kv * row_bytes;

  for (int64_t idx = threadIdx.x; idx < kRows * head_dim; idx += kThreads) {
    const int64_t r = idx / head_dim;
    const int64_t e = idx % head_dim;
    qs[r * ldh + e] = to_16bit<T>(r < nr ? q[((first_row + r) * n_head + h) * head_dim + e] * scale : 0.0f);
    os[r * ldo + e] = 0.0f;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.0f;
  }

  for (int64_t k0 = k_lo; k0 < k_hi; k0 += kKeys) {
    __syncthreads();  // the previous tile's P · V is done with ks, vs, ps and os (and Q, O are set)
    load_tile<KT, T, Vec>(ks, ldh, kc, table, k0, k_hi, block_size, slot_stride, row_bytes, kvh, head_dim);
    load_tile<KT, T, Vec>(vs, ldh, vc, table, k0, k_hi, block_size, slot_stride, row_bytes, kvh, head_dim);
    __syncthreads();

    {  // S = Q K^T: warp w computes rows 16 (w / 2) .. +16, keys 32 (w % 2) .. +32
      const int rb = warp >> 1;
      const int cb = (warp & 1) * 2;
      wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> s0, s1;
      wmma::fill_fragment(s0, 0.0f);
      wmma::fill_fragment(s1, 0.0f);
      for (int64_t e = 0; e < head_dim; e += kFrag) {
        wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::col_major> b0, b1;
        wmma::load_matrix_sync(a, qs + rb * kFrag * ldh + e, static_cast<unsigned>(ldh));
        // K rows laid out [key][d] are K^T in column-major order.
        wmma::load_matrix_sync(b0, ks + cb * kFrag * ldh + e, static_cast<unsigned>(ldh));
        wmma::load_matrix_sync(b1, ks + (cb + 1) * kFrag * ldh + e, static_cast<unsigned>(ldh));
        wmma::mma_sync(s0, a, b0, s0);
        wmma::mma_sync(s1, a, b1, s1);
      }
      wmma::store_matrix_sync(ss + rb * kFrag * kLdS + cb * kFrag, s0, kLdS, wmma::mem_row_major);
      wmma::store_matrix_sync(ss + rb * kFrag * kLdS + (cb + 1) * kFrag, s1, kLdS, wmma::mem_row_major);
    }
    __syncthreads();

    // Online softmax, a warp per 8 rows, a lane per keys lane and lane + 32;
    // then the warp rescales its own rows of O.
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr;
      const int64_t pr = pos0 + r;
      float sv[2];
      float mx = -INFINITY;
#pragma unroll
      for (int side = 0; side < 2; ++side) {
        const int j = lane + 32 * side;
        const int64_t t = k0 + j;
        const bool visible = key_visible(meta, tile, r, pr, t, window, causal);
        sv[side] = visible ? soft_cap(ss[r * kLdS + j], softcap) : -INFINITY;
        mx = fmaxf(mx, sv[side]);
      }
      const float m_new = fmaxf(m[rr], warp_max(mx));
      float p0 = 0.0f, p1 = 0.0f, c = 1.0f;
      if (m_new != -INFINITY) {
        p0 = expf(sv[0] - m_new);  // 0 for masked keys
        p1 = expf(sv[1] - m_new);
        c = expf(m[rr] - m_new);  // 0 on the row's first visible tile
      }
      l[rr] = l[rr] * c + warp_sum(p0 + p1);
      m[rr] = m_new;
      ps[r * kLdP + lane] = to_16bit<T>(p0);
      ps[r * kLdP + lane + 32] = to_16bit<T>(p1);
      if (c != 1.0f) {
        for (int64_t e = lane; e < head_dim; e += 32) os[r * ldo + e] *= c;
      }
    }
    __syncthreads();

    // O += P V: fragment f covers rows 16 (f % 2) .. +16, dims 16 (f / 2) .. +16.
    for (int f = warp; f < 2 * static_cast<int>(head_dim / kFrag); f += kWarps) {
      const int rb = f & 1;
      const int64_t e = static_cast<int64_t>(f >> 1) * kFrag;
      wmma::fragment<wmma::accumulator, kFrag, kFrag, kFrag, float> o;
      wmma::load_matrix_sync(o, os + rb * kFrag * ldo + e, static_cast<unsigned>(ldo), wmma::mem_row_major);
#pragma unroll
      for (int j = 0; j < kKeys; j += kFrag) {
        wmma::fragment<wmma::matrix_a, kFrag, kFrag, kFrag, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, kFrag, kFrag, kFrag, T, wmma::row_major> b;
        wmma::load_matrix_sync(a, ps + rb * kFrag * kLdP + j, kLdP);
        wmma::load_matrix_sync(b, vs + j * ldh + e, static_cast<unsigned>(ldh));
        wmma::mma_sync(o, a, b, o);
      }
      wmma::store_matrix_sync(os + rb * kFrag * ldo + e, o, static_cast<unsigned>(ldo), wmma::mem_row_major);
    }
  }
  __syncthreads();

#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp * kRowsPerWarp + rr;
    if (r >= nr) continue;
    float* o = out + ((first_row + r) * n_head + h) * head_dim;
    // l > 0 and m finite: the row sees its own key. A sink joins the denominator.
    const float den = l[rr] + (sinks != nullptr ? expf(sinks[h] - m[rr]) : 0.0f);
    for (int64_t e = lane; e < head_dim; e += 32) o[e] = os[r * ldo + e] / den;
  }
#endif
}

template <int KT, class T, bool Vec>
void launch_kernel(float* out, const float* q, const PagedKvView& kv, const AttnMeta& meta, const AttnArgs& args,
                   cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(meta.n_tiles), static_cast<unsigned>(args.n_head));
  attn_prefill_mma_kernel<KT, T, Vec><<<grid, kThreads, static_cast<size_t>(mma_layout(kv.head_dim).bytes), stream>>>(
      out, q, static_cast<const unsigned char*>(kv.k), static_cast<const unsigned char*>(kv.v), kv.block_size,
      kv.n_head_kv, kv.head_dim, kv.row_bytes(), meta, args.n_head, args.scale, args.window, args.causal, args.softcap,
      args.sinks);
  TROUPE_CUDA_CHECK_LAUNCH();
}

// 16-byte row reads where every row starts 16-byte aligned (head_dim is a
// multiple of 16, so row_bytes is a multiple of 32 for 16-bit and 64 for
// f32 rows; the cache's base decides).
template <int KT, class T>
void launch(float* out, const float* q, const PagedKvView& kv, const AttnMeta& meta, const AttnArgs& args,
            cudaStream_t stream) {
  const bool vec = KT != kQ8 && reinterpret_cast<uintptr_t>(kv.k) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(kv.v) % 16 == 0 && kv.row_bytes() % 16 == 0;
  if (vec) return launch_kernel<KT, T, true>(out, q, kv, meta, args, stream);
  launch_kernel<KT, T, false>(out, q, kv, meta, args, stream);
}

template <int KT, class T>
void raise_smem_limit(int bytes) {
  for (auto* kernel : {attn_prefill_mma_kernel<KT, T, true>, attn_prefill_mma_kernel<KT, T, false>}) {
    TROUPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
}

}  // namespace

bool attention_prefill_mma_supported(int cc_major, int smem_optin, int64_t head_dim) {
  return cc_major >= 8 && head_dim > 0 && head_dim % kFrag == 0 && head_dim <= kAttnMaxHeadDim &&
         mma_layout(head_dim).bytes <= smem_optin;
}

void attention_mma_init(int smem_optin) {
  const auto most = static_cast<int>(mma_layout(kAttnMaxHeadDim).bytes);
  const int bytes = most < smem_optin ? most : smem_optin;
  raise_smem_limit<kF32, __half>(bytes);
  raise_smem_limit<kF16, __half>(bytes);
  raise_smem_limit<kBf16, __nv_bfloat16>(bytes);
  raise_smem_limit<kQ8, __half>(bytes);
}

void attention_prefill_mma(float* out, const float* q, const PagedKvView& kv, const AttnMeta& meta,
                           const AttnArgs& args, cudaStream_t stream) {
  switch (kv.type) {
    case KvType::f32: return launch<kF32, __half>(out, q, kv, meta, args, stream);
    case KvType::f16: return launch<kF16, __half>(out, q, kv, meta, args, stream);
    case KvType::bf16: return launch<kBf16, __nv_bfloat16>(out, q, kv, meta, args, stream);
    case KvType::q8_0: return launch<kQ8, __half>(out, q, kv, meta, args, stream);
  }
}

}  // namespace troupe::cuda
