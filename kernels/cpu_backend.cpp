// CpuBackend: thin forwarding to the CPU kernels; the elementwise helpers
// that are too small to deserve a kernel file live here.
#include "kernels/cpu_backend.hpp"

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/bf16_packed.hpp"
#include "kernels/cpu/f32_packed.hpp"
#include "kernels/cpu/half_packed.hpp"
#include "kernels/cpu/int8_packed.hpp"
#include "kernels/cpu/vec_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace troupe {
namespace {

constexpr size_t kAlignment = 64;  // a cache line; also what AVX-512 loads like
// A LoRA update runs on the calling thread below both: multiply-adds (a
// decode step's rank 16 over 768 x 3072, 61 thousand, take about a
// microsecond, less than waking the pool) and factor bytes (about what an
// L2 holds: more is a stream better shared). Otherwise A x is split by
// tokens from kLoraSplitTokens up, and B m by parts of kLoraColumns of y.
constexpr int64_t kLoraInlineWork = int64_t{1} << 18;
constexpr int64_t kLoraInlineBytes = int64_t{256} << 10;
constexpr int64_t kLoraSplitTokens = 8;
constexpr int64_t kLoraColumns = 64;

void* aligned_host_memory(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

// Memory that decode or a step streams: from 2 MiB up in transparent huge
// pages where the kernel grants them (on madvise): measured +16% decode on
// the 1B q4_0 model, 3 interleaved rounds (docs/performance.md).
void* streamed_memory(size_t bytes) {
  if (bytes < kHugePageBytes) return aligned_host_memory(bytes);
  return huge_page_memory(bytes);
}

}  // namespace

void* packed_weight_memory(WeightSlabs& slabs, size_t bytes) {
  return bytes < WeightSlabs::kMaxPiece ? slabs.allocate(bytes) : streamed_memory(bytes);
}

void release_weight_memory(WeightSlabs& slabs, void* p) {
  if (!slabs.release(p)) std::free(p);
}

CpuBackend::CpuBackend(CpuBackendOptions options)
    : pool_(options.n_threads,
            options.cpus.empty() ? claim_cpus(options.n_threads > 0 ? options.n_threads : hardware_threads())
                                 : std::move(options.cpus)) {}

CpuBackend::~CpuBackend() { kernels::count_int8_packed_bytes(-int8_bytes_); }

// KV pages and the step arena, zero-filled here, as the CUDA backend's: a
// page first touched by a decode step's KV write costs that step a fault
// (2-thread 110M decode: kv_write took 7.7 us a layer, against under 1 us
// resident), and the pool is sized once for the model's life anyway. From
// 2 MiB up it takes huge pages, as the weights do.
void* CpuBackend::allocate(size_t bytes) {
  void* p = streamed_memory(bytes);
  std::memset(p, 0, bytes);
  return p;
}

void CpuBackend::deallocate(void* p) { release_weight_memory(weight_slabs_, p); }

// The Backend defaults: plain aligned host memory, and the weight types the
// CPU kernels run.
void* Backend::host_alloc(size_t bytes) { return aligned_host_memory(bytes); }

void Backend::host_free(void* p) { std::free(p); }

void Backend::matmul_n(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens) {
  for (const MatmulOut& o : outs) matmul(o.y, x, *o.w, n_tokens);
}

void Backend::short_conv(float*, const float*, const PagedKvView&, const AttnSeq*, int, const float*, const float*,
                         int64_t) {
  throw Error(Errc::unsupported, "the " + std::string(name()) + " backend has no short convolution (LFM2's conv "
                                 "layers): run those layers on a cpu or cuda stage");
}

void Backend::sigmoid_gate(float*, const float*, int64_t) {
  throw Error(Errc::unsupported, "the " + std::string(name()) + " backend has no sigmoid gate (Qwen3-Next's gated "
                                 "attention): run those layers on a cpu stage");
}

void Backend::gated_delta_net(float*, float*, const float*, const float*, const PagedKvView&, const AttnSeq*, int,
                              const float*, const float*, const float*, const kernels::GatedDeltaShape&) {
  throw Error(Errc::unsupported, "the " + std::string(name()) + " backend has no Gated DeltaNet (the recurrent "
                                 "layers of Qwen3-Next and Qwen3.5): run those layers on a cpu stage");
}

void Backend::mamba2_scan(float*, float*, const PagedKvView&, const AttnSeq*, int, const kernels::Mamba2Weights&,
                          const kernels::Mamba2Shape&) {
  throw Error(Errc::unsupported, "the " + std::string(name()) + " backend has no Mamba-2 scan (Granite 4.0-H's "
                                 "recurrent layers): run those layers on a cpu stage");
}

void Backend::xielu(float*, const float*, int64_t, float, float, float, float) {
  throw Error(Errc::unsupported, "the " + std::string(name()) + " backend has no xIELU activation (Apertus)");
}

bool Backend::supports(DType type) const {
  switch (type) {
    case DType::f32:
    case DType::f16:
    case DType::bf16:
    case DType::q8_0:
    case DType::q4_0:
    case DType::q4_1:
    case DType::q5_0:
    case DType::q5_1:
    case DType::q2_K:
    case DType::q3_K:
    case DType::q4_K:
    case DType::q5_K:
    case DType::q6_K:
    case DType::iq4_nl:
    case DType::iq4_xs:
    case DType::mxfp4:
      return true;
    default:
      return false;
  }
}

void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::copy_from_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

namespace {

// The int8 layout runs on AVX-512 VNNI and on AVX2 (int8_packed.hpp), the
// f32 layout on AVX-512 and AVX2, the bf16 layout on AVX-512 BF16, and on
// AVX2 f16 and bf16 weights take the 16-bit layout (half_packed.hpp), exact
// values. A forced scalar path, as in the tests, keeps the exact kernels.
// f16 and bf16 weights are repacked as bf16 wherever vdpbf16ps exists, AMX
// or not: on Zen 5 it beats the f32 kernels by about 2x in prefill
// (docs/performance.md). The bf16 lines round
// f16 weights to 8 significant bits (exactly, for an f16 file made from bf16
// weights); --exact-math keeps them as they are. f32 weights are repacked
// as f32 (kernels/cpu/f32_packed.hpp): the same values, other sums.
enum class Packing { none, int8, bf16, half, f32 };
Packing packing_now(DType t) {
  if (exact_math()) return Packing::none;
  if (kernels::int8_packing_available(t)) return Packing::int8;
  if (active_isa() == Isa::avx512 && kernels::bf16_packing_available(t)) return Packing::bf16;
  if (kernels::half_packing_available(t)) return Packing::half;
  if (t == DType::f32 && kernels::f32_packing_available()) return Packing::f32;
  return Packing::none;
}

int64_t packed_bytes(Packing how, const Weight& w) {
  switch (how) {
    case Packing::int8: return kernels::int8_packed_bytes(w.type, w.n_in, w.n_out);
    case Packing::bf16: return kernels::bf16_packed_bytes(w.n_in, w.n_out);
    case Packing::half: return kernels::half_packed_bytes(w.n_in, w.n_out);
    case Packing::f32: return kernels::f32_packed_bytes(w.n_in, w.n_out);
    case Packing::none: break;
  }
  return 0;
}

}  // namespace

Weight CpuBackend::prepare_matmul(const Weight& w) {
  if (w.packed != nullptr || w.data == nullptr) return w;
  const Packing how = packing_now(w.type);
  if (how == Packing::none) return w;
  Weight out = w;
  const auto bytes = static_cast<size_t>(packed_bytes(how, w));
  void* packed = packed_weight_memory(weight_slabs_, bytes);
  try {
    switch (how) {
      case Packing::int8: kernels::pack_int8(packed, w.data, w.type, w.n_in, w.n_out, pool_); break;
      case Packing::bf16: kernels::pack_bf16(packed, w.data, w.type, w.n_in, w.n_out, pool_); break;
      case Packing::half: kernels::pack_half(packed, w.data, w.type, w.n_in, w.n_out, pool_); break;
      case Packing::f32:
        kernels::pack_f32(packed, static_cast<const float*>(w.data), w.n_in, w.n_out, pool_);
        break;
      case Packing::none: break;
    }
  } catch (...) {
    deallocate(packed);
    throw;
  }
  if (how == Packing::int8) {
    int8_bytes_ += static_cast<int64_t>(bytes);
    kernels::count_int8_packed_bytes(static_cast<int64_t>(bytes));
  }
  out.packed = packed;
  return out;
}

void CpuBackend::matmul(float* y, const float* x, const Weight& w, int64_t n_tokens) {
  matmul_weights(y, x, w, n_tokens);
  if (w.lora != nullptr) add_lora(y, x, w, n_tokens);
}

void CpuBackend::matmul_weights(float* y, const float* x, const Weight& w, int64_t n_tokens) {
  if (w.packed != nullptr) {
    switch (packing_now(w.type)) {
      case Packing::int8:
        kernels::matmul_int8_packed(y, x, w.packed, w.type, n_tokens, w.n_in, w.n_out, pool_);
        return;
      case Packing::bf16: kernels::matmul_bf16_packed(y, x, w.packed, n_tokens, w.n_in, w.n_out, pool_); return;
      case Packing::half:
        kernels::matmul_half_packed(y, x, w.packed, w.type, n_tokens, w.n_in, w.n_out, pool_);
        return;
      case Packing::f32: kernels::matmul_f32_packed(y, x, w.packed, n_tokens, w.n_in, w.n_out, pool_); return;
      case Packing::none: break;
    }
  }
  kernels::matmul(y, x, w.data, w.type, n_tokens, w.n_in, w.n_out, pool_);
}

// Unmerged, as PEFT runs an adapter: the rank-r products first (m = A x,
// r dot products a token), then y += B m (r rows of B^T added in), so an
// update costs r (n_in + n_out) multiply-adds a token against the matrix's
// n_in n_out, and the base weights stay as the file has them (quantized
// ones included). Each token's values are its own (no batch dependence).
// A small update runs on the calling thread: waking the pool three times a
// matrix, as two matmuls and an add did, cost a 110M model's decode 25-33%.
// A large one splits B^T's columns (y's rows) over the pool, each part read
// once for every token; a 1.24B model's rank-16 factors are 45 MB, read
// every decode step (docs/performance.md, "LoRA adapters").
void CpuBackend::add_lora(float* y, const float* x, const Weight& w, int64_t n_tokens) {
  const kernels::cpu::VecOps& ops = kernels::cpu::vec_ops();
  thread_local std::vector<float> mid;  // [n_tokens, rank], grown to the largest step
  for (const LoraDelta* d = w.lora; d != nullptr; d = d->next) {
    const int64_t r = d->rank;
    const float* bt = d->bt + w.lora_row0;
    mid.resize(static_cast<size_t>(n_tokens * r));
    float* m = mid.data();
    auto down = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) ops.dot_tile(m + t * r, x + t * w.n_in, d->a, w.n_in, r, w.n_in, 1.0f);
    };
    auto up = [&](int64_t o0, int64_t o1) {
      for (int64_t t = 0; t < n_tokens; ++t) {
        ops.acc_tile(y + t * w.n_out + o0, 1.0f, m + t * r, bt + o0, d->rows, r, o1 - o0);
      }
    };
    const int64_t work = n_tokens * r * (w.n_in + w.n_out);
    const auto bytes = static_cast<int64_t>(sizeof(float)) * r * (w.n_in + w.n_out);
    if (work < kLoraInlineWork && bytes < kLoraInlineBytes) {
      down(0, n_tokens);
      up(0, w.n_out);
      continue;
    }
    if (n_tokens >= kLoraSplitTokens) {
      pool_.parallel_for(n_tokens, down);
    } else {
      down(0, n_tokens);
    }
    const int64_t n_parts = (w.n_out + kLoraColumns - 1) / kLoraColumns;
    pool_.parallel_for(n_parts,
                       [&](int64_t p0, int64_t p1) { up(p0 * kLoraColumns, std::min(p1 * kLoraColumns, w.n_out)); });
  }
}

// Matrices repacked for the int8 path with one type run as one int8 matmul
// (x quantized once, one dispatch); any other mix runs one by one.
void CpuBackend::matmul_n(std::span<const MatmulOut> outs, const float* x, int64_t n_tokens) {
  constexpr size_t kMax = kernels::kMaxPackedOutputs;
  if (outs.empty()) return;
  const Weight& w0 = *outs.front().w;
  const bool fused = outs.size() > 1 && outs.size() <= kMax && packing_now(w0.type) == Packing::int8 &&
                     std::ranges::all_of(outs, [&](const MatmulOut& o) {
                       return o.w->packed != nullptr && o.w->type == w0.type && o.w->n_in == w0.n_in;
                     });
  if (!fused) {
    Backend::matmul_n(outs, x, n_tokens);
    return;
  }
  kernels::PackedOutput parts[kMax];
  for (size_t i = 0; i < outs.size(); ++i) {
    parts[i] = {.y = outs[i].y, .packed = outs[i].w->packed, .n_out = outs[i].w->n_out};
  }
  kernels::matmul_int8_packed_n(std::span(parts, outs.size()), x, w0.type, n_tokens, w0.n_in, pool_);
  for (const MatmulOut& o : outs) {
    if (o.w->lora != nullptr) add_lora(o.y, x, *o.w, n_tokens);
  }
}

void CpuBackend::embedding(float* y, const Weight& table, const int32_t* ids, int64_t n_tokens) {
  kernels::embedding(y, table.data, table.type, ids, n_tokens, table.n_in);
}

// Elementwise and per-row work is split over the pool only for a prefill's
// sizes: a decode step's vectors are too short to repay waking the workers.
// Chunks are whole multiples of 64 elements, so every element meets the same
// vector code (and the same bits) as in one call over the whole array.
constexpr int64_t kParallelMin = 1 << 16;
constexpr int64_t kChunk = 1 << 12;

template <class F>
void CpuBackend::split_elements(int64_t n, F&& fn) {
  if (n < kParallelMin || pool_.size() == 1) {
    fn(int64_t{0}, n);
    return;
  }
  pool_.parallel_for((n + kChunk - 1) / kChunk,
                     [&](int64_t c0, int64_t c1) { fn(c0 * kChunk, std::min(c1 * kChunk, n)); });
}

void CpuBackend::rmsnorm(float* y, const float* x, const float* weight, int64_t n_tokens, int64_t n_embd, float eps) {
  if (n_tokens * n_embd < kParallelMin || pool_.size() == 1) {
    kernels::rmsnorm(y, x, weight, n_tokens, n_embd, eps);
    return;
  }
  pool_.parallel_for(n_tokens, [&](int64_t t0, int64_t t1) {
    kernels::rmsnorm(y + t0 * n_embd, x + t0 * n_embd, weight, t1 - t0, n_embd, eps);
  });
}

void CpuBackend::layernorm(float* y, const float* x, const float* weight, const float* bias, int64_t n_tokens,
                           int64_t n_embd, float eps) {
  kernels::layernorm(y, x, weight, bias, n_tokens, n_embd, eps);
}

void CpuBackend::add(float* y, const float* x, int64_t n) {
  split_elements(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] += x[i];
  });
}

void CpuBackend::add_bias(float* y, const float* bias, int64_t n_rows, int64_t n_cols) {
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = y + r * n_cols;
    for (int64_t c = 0; c < n_cols; ++c) row[c] += bias[c];
  }
}

void CpuBackend::rope(float* x, const int32_t* pos, int64_t n_tokens, int64_t n_head, int64_t head_dim,
                      const kernels::RopeParams& p) {
  kernels::rope(x, pos, n_tokens, n_head, head_dim, p);
}

void CpuBackend::swiglu(float* y, const float* gate, const float* up, int64_t n) {
  split_elements(n, [&](int64_t i0, int64_t i1) { kernels::swiglu(y + i0, gate + i0, up + i0, i1 - i0); });
}

void CpuBackend::swiglu_oai(float* y, const float* gate, const float* up, int64_t n, float alpha, float limit) {
  split_elements(n, [&](int64_t i0, int64_t i1) {
    kernels::swiglu_oai(y + i0, gate + i0, up + i0, i1 - i0, alpha, limit);
  });
}

void CpuBackend::gelu(float* y, const float* x, int64_t n) { kernels::gelu(y, x, n); }

// Threaded: an encoder runs it over [n_tokens, n_ff] of every prompt.
void CpuBackend::gelu_erf(float* y, const float* x, int64_t n) {
  split_elements(n, [&](int64_t i0, int64_t i1) { kernels::gelu_erf(y + i0, x + i0, i1 - i0); });
}

// A classifier head's [n_rows, n_embd]: small, so not threaded.
void CpuBackend::relu(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// Threaded: a CLIP vision tower runs it over [n_patches, n_ff] of each image.
void CpuBackend::quick_gelu(float* y, const float* x, int64_t n) {
  split_elements(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = x[i] / (1.0f + std::exp(-1.702f * x[i]));
  });
}

void CpuBackend::xielu(float* y, const float* x, int64_t n, float alpha_p, float alpha_n, float beta, float eps) {
  split_elements(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float v = x[i];
      y[i] = v > 0.0f ? alpha_p * v * v + beta * v : (std::expm1(std::min(v, eps)) - v) * alpha_n + beta * v;
    }
  });
}

void CpuBackend::geglu(float* y, const float* gate, const float* up, int64_t n) {
  split_elements(n, [&](int64_t i0, int64_t i1) {
    kernels::gelu(y + i0, gate + i0, i1 - i0);
    for (int64_t i = i0; i < i1; ++i) y[i] *= up[i];
  });
}

// Threaded: an encoder runs it over [n_tokens, n_ff] of every prompt.
void CpuBackend::geglu_erf(float* y, const float* gate, const float* up, int64_t n) {
  split_elements(n, [&](int64_t i0, int64_t i1) {
    kernels::gelu_erf(y + i0, gate + i0, i1 - i0);
    for (int64_t i = i0; i < i1; ++i) y[i] *= up[i];
  });
}

void CpuBackend::scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void CpuBackend::soft_cap(float* x, float cap, int64_t n) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

void CpuBackend::gather_rows(float* y, const float* x, const int32_t* rows, int64_t n_rows, int64_t n_cols) {
  for (int64_t i = 0; i < n_rows; ++i) {
    std::memmove(y + i * n_cols, x + static_cast<int64_t>(rows[i]) * n_cols, static_cast<size_t>(n_cols) * 4);
  }
}

void CpuBackend::short_conv(float* y, const float* bcx, const PagedKvView& cache, const AttnSeq* seqs, int n_seqs,
                            const float* weight, const float* bias, int64_t taps) {
  kernels::short_conv(y, bcx, cache, seqs, n_seqs, weight, bias, taps, pool_);
}

void CpuBackend::sigmoid_gate(float* y, const float* gate, int64_t n) {
  split_elements(n, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] /= 1.0f + std::exp(-gate[i]);
  });
}

void CpuBackend::gated_delta_net(float* out, float* qkv, const float* b, const float* a, const PagedKvView& state,
                                 const AttnSeq* seqs, int n_seqs, const float* conv_w, const float* decay,
                                 const float* dt_bias, const kernels::GatedDeltaShape& shape) {
  kernels::gated_delta_net(out, qkv, b, a, state, seqs, n_seqs, conv_w, decay, dt_bias, shape, pool_);
}

void CpuBackend::mamba2_scan(float* y, float* proj, const PagedKvView& state, const AttnSeq* seqs, int n_seqs,
                             const kernels::Mamba2Weights& w, const kernels::Mamba2Shape& shape) {
  kernels::mamba2_scan(y, proj, state, seqs, n_seqs, w, shape, pool_);
}

void CpuBackend::kv_write(const PagedKvView& kv, const float* k, const float* v, const AttnSeq* seqs, int n_seqs) {
  kernels::kv_write(kv, k, v, seqs, n_seqs);
}

void CpuBackend::attention(float* out, const float* q, const PagedKvView& kv, const AttnSeq* seqs, int n_seqs,
                           int64_t n_head, float scale, int32_t window, float softcap, const float* sinks,
                           bool causal) {
  kernels::attention(out, q, kv, seqs, n_seqs, n_head, scale, pool_, window, softcap, sinks, causal);
}

}  // namespace troupe
