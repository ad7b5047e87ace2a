// Attention over the paged KV cache, and the kv_write that fills it.
//
// Decode (one query per sequence): flash-decoding. Each block takes one
// (sequence, query head, split of the visible keys); its four warps walk the
// split's keys, one key per warp step (dot product reduced by warp shuffles,
// online softmax in registers), then merge their (max, sum, acc) in shared
// memory. With several splits, each writes a partial and a reduce kernel
// rescales and sums them, so a long context keeps every SM busy even at
// batch 1.
//
// Prefill (several queries): flash-attention style. Each block takes 32
// queries of one sequence and one head, walks the visible keys in tiles of
// 32 through shared memory with an online softmax per query row (causal,
// sliding window, grouped-query: head h reads kv head h / (n_head / n_head_kv)),
// so nothing of size [n_q, n_kv] is ever materialised. Scalar fp32 math,
// matching the CPU kernel's precision.
//
// The cache's element type (memory/kv_type.hpp: f32, f16, bf16, q8_0) is a
// template parameter of every kernel: rows are read in place and converted
// to f32 in registers (kv_load), so a q8_0 cache moves a quarter of the
// bytes of f32. q8_0 needs head_dim a multiple of 32 here
// (kernels/kv_support.cpp), so lane-element i of a row is in scale group i.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/launchers.hpp"
#include "kernels/cuda/reduce.cuh"
#include "kernels/kv_support.hpp"

namespace troupe::cuda {
namespace {

constexpr int kThreads = 128;  // 4 warps, for every attention kernel
constexpr int kWarps = kThreads / 32;
constexpr int kTileK = 32;                   // keys per prefill tile (one per lane)
constexpr int kRowsPerWarp = kAttnTileQ / kWarps;  // prefill query rows each warp owns

// ---- kernels -----------------------------------------------------------

template <int KT>
__global__ void kv_write_kernel(unsigned char* __restrict__ kc, unsigned char* __restrict__ vc,
                                const float* __restrict__ k, const float* __restrict__ v, int64_t block_size,
                                int64_t n_head_kv, int64_t head_dim, int64_t row_bytes, AttnMeta meta) {
  const DevSeq s = meta.seqs[blockIdx.x];
  const int32_t* table = meta.tables + s.table;
  const int64_t units = KT == kQ8 ? head_dim / kQ8Group : head_dim;  // per row
  for (int j = blockIdx.y; j < s.n_q; j += gridDim.y) {
    const int64_t p = static_cast<int64_t>(s.n_past) + j;
    const int64_t slot = static_cast<int64_t>(table[p / block_size]) * block_size + p % block_size;
    const int64_t src = static_cast<int64_t>(s.q_begin + j) * n_head_kv * head_dim;
    for (int64_t i = threadIdx.x; i < n_head_kv * units; i += blockDim.x) {
      const int64_t h = i / units;
      const int64_t dst = (slot * n_head_kv + h) * row_bytes;
      kv_store_unit<KT>(kc + dst, k + src + h * head_dim, i % units, head_dim);
      kv_store_unit<KT>(vc + dst, v + src + h * head_dim, i % units, head_dim);
    }
  }
}

// NDC: head_dim / 32 rounded up to a power of two (lane holds dims lane + 32 i).
template <int NDC, int KT>
__global__ void __launch_bounds__(kThreads)
    attn_decode_kernel(float* __restrict__ out, const float* __restrict__ q, const unsigned char* __restrict__ kc,
                       const unsigned char* __restrict__ vc, int64_t block_size, int64_t n_head_kv,
                       int64_t head_dim, int64_t row_bytes, AttnMeta meta, int64_t n_head, float scale, int32_t window,
                       float softcap, const float* __restrict__ sinks, int32_t split_len,
                       float* __restrict__ partials) {
  __shared__ float sm_m[kWarps];
  __shared__ float sm_l[kWarps];
  __shared__ float sm_acc[kWarps][kAttnMaxHeadDim];
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const DevSeq s = meta.seqs[meta.dec[blockIdx.x]];
  const int64_t h = blockIdx.y;
  const int64_t kvh = h / (n_head / n_head_kv);
  const int64_t pos = s.n_past;  // the sequence's single query
  const int64_t lo = window > 0 ? max(int64_t{0}, pos - window + 1) : int64_t{0};
  const int64_t a = lo + static_cast<int64_t>(blockIdx.z) * split_len;
  const int64_t e = min(pos + 1, a + split_len);
  const int64_t row = static_cast<int64_t>(s.q_begin) * n_head + h;

  float qv[NDC], acc[NDC];
#pragma unroll
  for (int i = 0; i < NDC; ++i) {
    const int64_t d = lane + 32 * i;
    qv[i] = d < head_dim ? q[row * head_dim + d] * scale : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int64_t slot_stride = n_head_kv * row_bytes;  // bytes
  const int32_t* table = meta.tables + s.table;
  for (int64_t t = a + warp; t < e; t += kWarps) {
    const int64_t off = (static_cast<int64_t>(table[t / block_size]) * block_size + t % block_size) * slot_stride +
                        kvh * row_bytes;
    float kr[NDC], vr[NDC];
#pragma unroll
    for (int i = 0; i < NDC; ++i) {
      const int64_t d = lane + 32 * i;
      kr[i] = d < head_dim ? kv_load<KT>(kc + off, d, head_dim) : 0.0f;
      vr[i] = d < head_dim ? kv_load<KT>(vc + off, d, head_dim) : 0.0f;
    }
    float sc = 0.0f;
#pragma unroll
    for (int i = 0; i < NDC; ++i) sc += qv[i] * kr[i];
    sc = soft_cap(warp_sum(sc), softcap);
    const float m_new = fmaxf(m, sc);
    const float corr = expf(m - m_new);  // 0 on the first key (m = -inf)
    const float p = expf(sc - m_new);
    l = l * corr + p;
#pragma unroll
    for (int i = 0; i < NDC; ++i) acc[i] = acc[i] * corr + p * vr[i];
    m = m_new;
  }

  // Merge the warps; a warp (or a whole split) that saw no key has m = -inf
  // and weighs zero.
  if (lane == 0) {
    sm_m[warp] = m;
    sm_l[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < NDC; ++i) {
    const int64_t d = lane + 32 * i;
    if (d < head_dim) sm_acc[warp][d] = acc[i];
  }
  __syncthreads();
  float mx = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, sm_m[w]);
  float f[kWarps];
  float sum = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    f[w] = sm_m[w] == -INFINITY ? 0.0f : expf(sm_m[w] - mx);
    sum += sm_l[w] * f[w];
  }
  const int n_splits = static_cast<int>(gridDim.z);
  float* part = n_splits > 1 ? partials + ((static_cast<int64_t>(blockIdx.x) * n_head + h) * n_splits + blockIdx.z) *
                                              (head_dim + 2)
                             : nullptr;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += sm_acc[w][d] * f[w];
    if (n_splits == 1) {
      // sum > 0 and mx finite: the query sees its own key. A sink joins the denominator.
      out[row * head_dim + d] = o / (sum + (sinks != nullptr ? expf(sinks[h] - mx) : 0.0f));
    } else {
      part[2 + d] = o;
    }
  }
  if (n_splits > 1 && threadIdx.x == 0) {
    part[0] = mx;
    part[1] = sum;
  }
}

// One block per (decode sequence, head): rescales the splits to a common max.
__global__ void attn_reduce_kernel(float* __restrict__ out, const float* __restrict__ partials, AttnMeta meta,
                                   int64_t n_head, int64_t head_dim, int n_splits, const float* __restrict__ sinks) {
  const DevSeq s = meta.seqs[meta.dec[blockIdx.x]];
  const int64_t h = blockIdx.y;
  const int64_t row = static_cast<int64_t>(s.q_begin) * n_head + h;
  const int64_t stride = head_dim + 2;
  const float* p = partials + (static_cast<int64_t>(blockIdx.x) * n_head + h) * n_splits * stride;
  float mx = -INFINITY;
  for (int z = 0; z < n_splits; ++z) mx = fmaxf(mx, p[z * stride]);
  float sum = 0.0f;
  for (int z = 0; z < n_splits; ++z) {
    const float mz = p[z * stride];
    if (mz != -INFINITY) sum += p[z * stride + 1] * expf(mz - mx);
  }
  if (sinks != nullptr) sum += expf(sinks[h] - mx);
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float o = 0.0f;
    for (int z = 0; z < n_splits; ++z) {
      const float mz = p[z * stride];
      if (mz != -INFINITY) o += p[z * stride + 2 + d] * expf(mz - mx);
    }
    out[row * head_dim + d] = o / sum;
  }
}

// Loads keys (or values) [k0, k0 + kTileK) of kv head kvh into tile rows of
// head_dim + 1 floats (the pad keeps lane-per-key reads conflict-free),
// converted to f32 on the way; rows past k_hi are zero. slot_stride and
// row_bytes are in bytes.
template <int KT>
__device__ __forceinline__ void load_kv_tile(float* tile, const unsigned char* __restrict__ cache,
                                             const int32_t* table, int64_t k0, int64_t k_hi, int64_t block_size,
                                             int64_t slot_stride, int64_t row_bytes, int64_t kvh, int64_t head_dim) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  for (int j = warp; j < kTileK; j += kWarps) {
    const int64_t t = k0 + j;
    float* dst = tile + j * (head_dim + 1);
    if (t < k_hi) {
      const unsigned char* src =
          cache + (static_cast<int64_t>(table[t / block_size]) * block_size + t % block_size) * slot_stride +
          kvh * row_bytes;
      for (int64_t d = lane; d < head_dim; d += 32) dst[d] = kv_load<KT>(src, d, head_dim);
    } else {
      for (int64_t d = lane; d < head_dim; d += 32) dst[d] = 0.0f;
    }
  }
}

template <int NDC, int KT>
__global__ void __launch_bounds__(kThreads)
    attn_prefill_kernel(float* __restrict__ out, const float* __restrict__ q, const unsigned char* __restrict__ kc,
                        const unsigned char* __restrict__ vc, int64_t block_size, int64_t n_head_kv, int64_t head_dim,
                        int64_t row_bytes, AttnMeta meta, int64_t n_head, float scale, int32_t window, bool causal,
                        float softcap, const float* __restrict__ sinks) {
  extern __shared__ float smem[];
  float* qs = smem;                                  // [kAttnTileQ][head_dim], pre-scaled
  float* kvs = qs + kAttnTileQ * head_dim;           // [kTileK][head_dim + 1]: K, then V
  float* ps = kvs + kTileK * (head_dim + 1);         // [kAttnTileQ][kTileK] softmax weights
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const PrefillTile tile = prefill_tile(meta, n_head, n_head_kv, window, causal);
  const int64_t h = tile.head, kvh = tile.kv_head, first_row = tile.first_row;
  const int64_t pos0 = tile.pos0, k_lo = tile.k_lo, k_hi = tile.k_hi;
  const int nr = tile.n_rows;  // valid query rows of this tile
  const int32_t* table = tile.table;
  const int64_t slot_stride = n_head_kv * row_bytes;  // bytes

  for (int64_t idx = threadIdx.x; idx < kAttnTileQ * head_dim; idx += blockDim.x) {
    const int64_t r = idx / head_dim;
    const int64_t d = idx % head_dim;
    qs[idx] = r < nr ? q[((first_row + r) * n_head + h) * head_dim + d] * scale : 0.0f;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], corr[kRowsPerWarp], acc[kRowsPerWarp][NDC];
#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.0f;
#pragma unroll
    for (int i = 0; i < NDC; ++i) acc[rr][i] = 0.0f;
  }

  for (int64_t k0 = k_lo; k0 < k_hi; k0 += kTileK) {
    __syncthreads();  // the previous tile's V reads (and the Q loads) are done
    load_kv_tile<KT>(kvs, kc, table, k0, k_hi, block_size, slot_stride, row_bytes, kvh, head_dim);
    __syncthreads();
    const int64_t t = k0 + lane;  // this lane's key
    const float* kr = kvs + lane * (head_dim + 1);
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr;
      const int64_t pr = pos0 + r;
      float sc = -INFINITY;
      if (key_visible(meta, tile, r, pr, t, window, causal)) {
        const float* qr = qs + r * head_dim;
        float dot = 0.0f;
#pragma unroll 4
        for (int64_t d = 0; d < head_dim; ++d) dot += qr[d] * kr[d];
        sc = soft_cap(dot, softcap);
      }
      const float m_new = fmaxf(m[rr], warp_max(sc));
      float p = 0.0f, c = 1.0f;
      if (m_new != -INFINITY) {
        p = expf(sc - m_new);    // 0 for masked keys
        c = expf(m[rr] - m_new);  // 0 on the row's first visible tile
      }
      l[rr] = l[rr] * c + warp_sum(p);
      m[rr] = m_new;
      corr[rr] = c;
      ps[r * kTileK + lane] = p;
    }
    __syncthreads();  // scores done with K
    load_kv_tile<KT>(kvs, vc, table, k0, k_hi, block_size, slot_stride, row_bytes, kvh, head_dim);
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < kRowsPerWarp; ++rr) {
      const int r = warp * kRowsPerWarp + rr;
      const float* prow = ps + r * kTileK;
#pragma unroll
      for (int i = 0; i < NDC; ++i) {
        const int64_t d = lane + 32 * i;
        if (d < head_dim) {
          float a = acc[rr][i] * corr[rr];
#pragma unroll 8
          for (int j = 0; j < kTileK; ++j) a += prow[j] * kvs[j * (head_dim + 1) + d];
          acc[rr][i] = a;
        }
      }
    }
  }

#pragma unroll
  for (int rr = 0; rr < kRowsPerWarp; ++rr) {
    const int r = warp * kRowsPerWarp + rr;
    if (r >= nr) continue;
    float* o = out + ((first_row + r) * n_head + h) * head_dim;
    // l > 0 and m finite: every row sees its own key. A sink joins the denominator.
    const float den = l[rr] + (sinks != nullptr ? expf(sinks[h] - m[rr]) : 0.0f);
#pragma unroll
    for (int i = 0; i < NDC; ++i) {
      const int64_t d = lane + 32 * i;
      if (d < head_dim) o[d] = acc[rr][i] / den;
    }
  }
}

// ---- launchers ---------------------------------------------------------

size_t prefill_smem_bytes(int64_t head_dim) {
  return static_cast<size_t>(kAttnTileQ * head_dim + kTileK * (head_dim + 1) + kAttnTileQ * kTileK) * sizeof(float);
}

int ndc_for(int64_t head_dim) {
  const int64_t n = (head_dim + 31) / 32;
  return n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : 8;
}

template <int NDC, int KT>
void launch_attention(float* out, const float* q, const PagedKvView& kv, const AttnMeta& meta, const AttnArgs& args,
                      cudaStream_t stream) {
  const auto* kc = static_cast<const unsigned char*>(kv.k);
  const auto* vc = static_cast<const unsigned char*>(kv.v);
  if (meta.n_dec > 0) {
    const dim3 grid(static_cast<unsigned>(meta.n_dec), static_cast<unsigned>(args.n_head),
                    static_cast<unsigned>(args.n_splits));
    attn_decode_kernel<NDC, KT><<<grid, kThreads, 0, stream>>>(out, q, kc, vc, kv.block_size, kv.n_head_kv,
                                                               kv.head_dim, kv.row_bytes(), meta, args.n_head,
                                                               args.scale, args.window, args.softcap,
                                                               args.sinks, args.split_len, args.partials);
    TROUPE_CUDA_CHECK_LAUNCH();
    if (args.n_splits > 1) {
      const dim3 rgrid(static_cast<unsigned>(meta.n_dec), static_cast<unsigned>(args.n_head));
      attn_reduce_kernel<<<rgrid, kThreads, 0, stream>>>(out, args.partials, meta, args.n_head, kv.head_dim,
                                                         args.n_splits, args.sinks);
      TROUPE_CUDA_CHECK_LAUNCH();
    }
  }
  if (meta.n_tiles > 0 && args.prefill_mma) {
    attention_prefill_mma(out, q, kv, meta, args, stream);
  } else if (meta.n_tiles > 0) {
    const dim3 grid(static_cast<unsigned>(meta.n_tiles), static_cast<unsigned>(args.n_head));
    attn_prefill_kernel<NDC, KT><<<grid, kThreads, prefill_smem_bytes(kv.head_dim), stream>>>(
        out, q, kc, vc, kv.block_size, kv.n_head_kv, kv.head_dim, kv.row_bytes(), meta, args.n_head, args.scale,
        args.window, args.causal, args.softcap, args.sinks);
    TROUPE_CUDA_CHECK_LAUNCH();
  }
}

template <int NDC, int KT>
void raise_smem_limit_kt() {
  TROUPE_CUDA_CHECK(cudaFuncSetAttribute(attn_prefill_kernel<NDC, KT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(prefill_smem_bytes(32 * NDC))));
}

template <int NDC>
void raise_smem_limit() {
  raise_smem_limit_kt<NDC, kF32>();
  raise_smem_limit_kt<NDC, kF16>();
  raise_smem_limit_kt<NDC, kBf16>();
  raise_smem_limit_kt<NDC, kQ8>();
}

template <int KT>
void launch_by_head_dim(float* out, const float* q, const PagedKvView& kv, const AttnMeta& meta,
                        const AttnArgs& args, cudaStream_t stream) {
  switch (ndc_for(kv.head_dim)) {
    case 1: return launch_attention<1, KT>(out, q, kv, meta, args, stream);
    case 2: return launch_attention<2, KT>(out, q, kv, meta, args, stream);
    case 4: return launch_attention<4, KT>(out, q, kv, meta, args, stream);
    default: return launch_attention<8, KT>(out, q, kv, meta, args, stream);
  }
}

void check_view(const char* fn, const PagedKvView& kv) {
  if (kv.k == nullptr || kv.v == nullptr || kv.n_blocks <= 0 || kv.block_size <= 0 || kv.n_head_kv <= 0 ||
      kv.head_dim <= 0 || kv.head_dim > kAttnMaxHeadDim) {
    throw Error(Errc::invalid_argument, std::string("cuda ") + fn + ": bad paged KV view (n_blocks=" +
                                            std::to_string(kv.n_blocks) + " block_size=" +
                                            std::to_string(kv.block_size) + " n_head_kv=" +
                                            std::to_string(kv.n_head_kv) + " head_dim=" + std::to_string(kv.head_dim) +
                                            ", head_dim at most " + std::to_string(kAttnMaxHeadDim) + ")");
  }
  if (const std::string why = kv_type_refusal("cuda", kv.type, kv.head_dim); !why.empty()) {
    throw Error(Errc::unsupported, std::string("cuda ") + fn + ": " + why);
  }
}

}  // namespace

int64_t attention_partial_floats(int64_t n_dec, int64_t n_head, int64_t n_splits, int64_t head_dim) {
  return n_splits > 1 ? n_dec * n_head * n_splits * (head_dim + 2) : 0;
}

void attention_init() {
  raise_smem_limit<1>();
  raise_smem_limit<2>();
  raise_smem_limit<4>();
  raise_smem_limit<8>();
}

void kv_write(const PagedKvView& kv, const float* k, const float* v, const AttnMeta& meta, cudaStream_t stream) {
  check_view("kv_write", kv);
  if (meta.n_seqs < 0 || meta.max_q < 0) throw Error(Errc::invalid_argument, "cuda kv_write: bad sequence metadata");
  if (meta.n_seqs == 0 || meta.max_q == 0) return;
  const dim3 grid(static_cast<unsigned>(meta.n_seqs), static_cast<unsigned>(meta.max_q < 256 ? meta.max_q : 256));
  auto* kc = static_cast<unsigned char*>(kv.k);
  auto* vc = static_cast<unsigned char*>(kv.v);
  const int64_t rb = kv.row_bytes();
  switch (kv.type) {
    case KvType::f32:
      kv_write_kernel<kF32><<<grid, 256, 0, stream>>>(kc, vc, k, v, kv.block_size, kv.n_head_kv, kv.head_dim, rb, meta);
      break;
    case KvType::f16:
      kv_write_kernel<kF16><<<grid, 256, 0, stream>>>(kc, vc, k, v, kv.block_size, kv.n_head_kv, kv.head_dim, rb, meta);
      break;
    case KvType::bf16:
      kv_write_kernel<kBf16><<<grid, 256, 0, stream>>>(kc, vc, k, v, kv.block_size, kv.n_head_kv, kv.head_dim, rb,
                                                       meta);
      break;
    case KvType::q8_0:
      kv_write_kernel<kQ8><<<grid, 256, 0, stream>>>(kc, vc, k, v, kv.block_size, kv.n_head_kv, kv.head_dim, rb, meta);
      break;
  }
  TROUPE_CUDA_CHECK_LAUNCH();
}

void attention(float* out, const float* q, const PagedKvView& kv, const AttnMeta& meta, const AttnArgs& args,
               cudaStream_t stream) {
  check_view("attention", kv);
  if (args.n_head <= 0 || args.n_head % kv.n_head_kv != 0 || args.n_head > 65535) {
    throw Error(Errc::invalid_argument, "cuda attention: n_head " + std::to_string(args.n_head) +
                                            " is not a positive multiple of n_head_kv " +
                                            std::to_string(kv.n_head_kv));
  }
  if (args.window < 0) {  // CudaBackend refuses it too; this guards direct callers
    throw Error(Errc::invalid_argument, "cuda attention: negative window " + std::to_string(args.window));
  }
  if (!args.causal && args.window > 0) {
    throw Error(Errc::invalid_argument, "cuda attention: a window needs causal attention");
  }
  if (meta.n_dec > 0 && (args.n_splits < 1 || args.n_splits > 65535 || args.split_len < 1 ||
                         (args.n_splits > 1 && args.partials == nullptr))) {
    throw Error(Errc::invalid_argument, "cuda attention: bad decode split (n_splits=" +
                                            std::to_string(args.n_splits) + " split_len=" +
                                            std::to_string(args.split_len) + ")");
  }
  switch (kv.type) {
    case KvType::f32: return launch_by_head_dim<kF32>(out, q, kv, meta, args, stream);
    case KvType::f16: return launch_by_head_dim<kF16>(out, q, kv, meta, args, stream);
    case KvType::bf16: return launch_by_head_dim<kBf16>(out, q, kv, meta, args, stream);
    case KvType::q8_0: return launch_by_head_dim<kQ8>(out, q, kv, meta, args, stream);
  }
}

}  // namespace troupe::cuda
