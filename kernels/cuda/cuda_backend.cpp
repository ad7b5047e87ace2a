// CudaBackend: device selection, the three memory pools (weights uploaded
// once into DevicePool chunks; KV pages and step arenas from allocate(), one
// cudaMalloc each at start-up), pinned host buffers and host<->device
// copies, and the run loop that launches recorded ops eagerly or as
// replayed CUDA graphs.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/backend_impl.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launchers.hpp"

namespace troupe {
namespace {

constexpr size_t kReadbackBytes = size_t{4} << 20;   // logits of a few sequences
constexpr size_t kConvertChunk = size_t{8} << 20;     // elements converted per upload copy
constexpr size_t kMinGraphOps = 4;                    // shorter runs are not worth a graph
constexpr size_t kMaxPending = 8192;                  // a run longer than this is launched in parts

// automatic -> what TROUPE_CUDA_PREFILL_ATTENTION says, else scalar.
PrefillAttention resolve(PrefillAttention p) {
  if (p != PrefillAttention::automatic) return p;
  const char* env = std::getenv("TROUPE_CUDA_PREFILL_ATTENTION");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "scalar") == 0) return PrefillAttention::scalar;
  if (std::strcmp(env, "tensor_cores") == 0) return PrefillAttention::tensor_cores;
  throw Error(Errc::invalid_argument,
              std::string("TROUPE_CUDA_PREFILL_ATTENTION is '") + env + "': use scalar or tensor_cores");
}

// automatic -> TROUPE_CUDA_GEMV_STAGING (0 or 1), else off.
GemvStaging resolve(GemvStaging g) {
  if (g != GemvStaging::automatic) return g;
  const char* env = std::getenv("TROUPE_CUDA_GEMV_STAGING");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "0") == 0) return GemvStaging::off;
  if (std::strcmp(env, "1") == 0) return GemvStaging::on;
  throw Error(Errc::invalid_argument, std::string("TROUPE_CUDA_GEMV_STAGING is '") + env + "': use 0 or 1");
}

bool is_device_pointer(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // older drivers report plain host pointers as errors
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

// Page-locked host memory (cudaHostAlloc, cudaHostRegister): copies from and
// to it are DMA the stream can run asynchronously.
bool is_pinned_host(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

}  // namespace

bool cuda_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    if (why != nullptr) {
      *why = "no usable CUDA device: cudaGetDeviceCount failed with error " + std::to_string(static_cast<int>(e)) +
             " (" + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
    }
    return false;
  }
  if (n == 0) {
    if (why != nullptr) *why = "no usable CUDA device: none visible";
    return false;
  }
  return true;
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

// ---- Impl: the run loop ---------------------------------------------------

CudaBackend::Impl::Impl(const CudaBackendOptions& options)
    : opt(options),
      ctx(options.device, options.workspace_bytes),
      staging(options.staging_bytes),
      weights(options.weight_chunk_bytes),
      graphs(options.cuda_graphs ? options.max_graphs : 0) {
  cuda::attention_init();
  mma_prefill = opt.prefill_attention == PrefillAttention::tensor_cores && ctx.cc_major() >= 8;
  if (mma_prefill) cuda::attention_mma_init(ctx.smem_optin_bytes());
  ctx.set_gemv_staging(opt.gemv_staging == GemvStaging::on);
  readback_bytes = kReadbackBytes;
  TROUPE_CUDA_CHECK(cudaHostAlloc(&readback, readback_bytes, cudaHostAllocDefault));
  pending.reserve(1024);
  running.reserve(1024);
}

CudaBackend::Impl::~Impl() {
  cudaSetDevice(ctx.device());  // unchecked: a destructor must not throw
  try {
    sync_all();
  } catch (const std::exception&) {
    // A failed step already reported its error; teardown frees what it can.
  }
  for (auto& [p, bytes] : pools) cudaFree(p);
  cudaFreeHost(readback);
}

void CudaBackend::Impl::use_device() const { TROUPE_CUDA_CHECK(cudaSetDevice(ctx.device())); }

void CudaBackend::Impl::check_fault() const {
  if (!fault.empty()) {
    throw Error(Errc::unavailable, "CUDA device " + std::to_string(ctx.device()) +
                                       " is unusable after an earlier error: " + fault);
  }
}

void CudaBackend::Impl::record(const cuda::Op& op) {
  check_fault();
  if (!pending.empty() && cuda::try_fuse(pending.back(), op)) {
    ++stats.fused_ops;
    return;
  }
  // Eager: only the last op waits (for fusion). Graphs: the run waits for
  // the sync point, unless it grows past any real step.
  if (!pending.empty() && (!opt.cuda_graphs || pending.size() >= kMaxPending)) flush();
  pending.push_back(op);
}

cuda::Staging::Slot CudaBackend::Impl::stage_host(cuda::StageTag tag, const void* data, size_t bytes) {
  auto slot = staging.put(tag, data, bytes);
  if (!slot) {
    sync_all();  // everything queued has read its staged data
    slot = staging.put(tag, data, bytes);
    if (!slot) {
      throw Error(Errc::out_of_memory, "CUDA staging buffer of " + std::to_string(staging.capacity()) +
                                           " bytes cannot hold " + std::to_string(bytes) +
                                           " bytes of index data (raise CudaBackendOptions.staging_bytes)");
    }
  }
  return *slot;
}

const void* CudaBackend::Impl::stage(cuda::StageTag tag, const void* data, size_t bytes) {
  const cuda::Staging::Slot slot = stage_host(tag, data, bytes);
  if (slot.fresh && bytes > 0) {
    cuda::Op op(cuda::OpKind::h2d);
    op.h2d = {.dst = slot.dev, .src = slot.host, .bytes = static_cast<int64_t>(bytes)};
    record(op);
  }
  return slot.dev;
}

void CudaBackend::Impl::flush() {
  guard([&] {
    // The device first, even with nothing pending: callers go on to use the
    // stream (copies, a synchronize) right after.
    use_device();
    if (pending.empty()) return;
    // Swap first: whatever happens below, these ops are not run twice.
    running.swap(pending);
    pending.clear();
    struct Clear {
      std::vector<cuda::Op>& v;
      ~Clear() { v.clear(); }
    } clear{running};

    if (opt.cuda_graphs && !capture_failed && running.size() >= kMinGraphOps) {
      const uint64_t h = cuda::hash_ops(running);
      if (cudaGraphExec_t g = graphs.find(h, running)) {
        TROUPE_CUDA_CHECK(cudaGraphLaunch(g, ctx.stream()));
        ++stats.graph_replays;
        return;
      }
      if (graphs.note(h)) {
        const cuda::Capture c = cuda::capture_ops(running, ctx);
        if (c.exec != nullptr) {
          graphs.insert(h, running, c.exec);
          TROUPE_CUDA_CHECK(cudaGraphLaunch(c.exec, ctx.stream()));
          ++stats.graph_captures;
          return;
        }
        // An op that failed inside the capture fails again below, eagerly,
        // with its own error. A capture that failed by itself (an op CUDA
        // cannot capture, instantiation refused) turns graphs off for this
        // backend: said once, so a slower server is not a mystery.
        if (!c.op_failed) {
          capture_failed = true;
          std::fprintf(stderr,
                       "troupe: CUDA graph capture failed on device %d (%s); this backend launches ops one by one "
                       "from now on\n",
                       ctx.device(), c.why.c_str());
        }
      }
    }
    for (const cuda::Op& op : running) cuda::execute(op, ctx);
    stats.eager_ops += static_cast<int64_t>(running.size());
  });
}

void CudaBackend::Impl::sync_all() {
  guard([&] {
    flush();
    TROUPE_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
    staging.reset();
  });
}

// ---- CudaBackend: memory and copies ---------------------------------------

CudaBackend::CudaBackend(CudaBackendOptions options) {
  // A mistyped TROUPE_CUDA_PREFILL_ATTENTION or _GEMV_STAGING is an error on any machine.
  options.prefill_attention = resolve(options.prefill_attention);
  options.gemv_staging = resolve(options.gemv_staging);
  std::string why;
  if (!cuda_available(&why)) throw Error(Errc::unsupported, "CUDA backend: " + why);
  const int n = cuda_device_count();
  if (options.device < 0 || options.device >= n) {
    throw Error(Errc::invalid_argument, "CUDA backend: device " + std::to_string(options.device) + " of " +
                                            std::to_string(n) + " visible");
  }
  if (options.staging_bytes == 0 || options.weight_chunk_bytes == 0) {
    throw Error(Errc::invalid_argument, "CUDA backend: staging_bytes and weight_chunk_bytes must be positive");
  }
  impl_ = std::make_unique<Impl>(options);
}

CudaBackend::~CudaBackend() = default;

std::string CudaBackend::device_name() const {
  cudaDeviceProp prop{};
  TROUPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, impl_->ctx.device()));
  return prop.name;
}

bool CudaBackend::tensor_core_prefill(int64_t head_dim) const {
  const Impl& m = *impl_;
  return m.mma_prefill &&
         (head_dim == 0 || cuda::attention_prefill_mma_supported(m.ctx.cc_major(), m.ctx.smem_optin_bytes(), head_dim));
}

size_t CudaBackend::free_device_memory() const {
  impl_->check_fault();
  impl_->use_device();
  size_t free_b = 0, total = 0;
  TROUPE_CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
  return free_b;
}

bool CudaBackend::supports(DType type) const {
  // What the GEMV, the cuBLAS path (with its row dequantization) and the
  // embedding gather run (gemv.cu, dequant.cuh).
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
  }
  return false;
}

void* CudaBackend::host_alloc(size_t bytes) {
  Impl& m = *impl_;
  return m.guard([&] {
    m.use_device();
    void* p = nullptr;
    // Portable: pinned for every device's context, so a buffer handed
    // between stages on different GPUs is DMA-able by each.
    const cudaError_t e = cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocPortable);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(Errc::out_of_memory, "CUDA backend: cannot allocate " + std::to_string(bytes) +
                                           " bytes of pinned host memory (" + cudaGetErrorString(e) + ")");
    }
    return p;
  });
}

void CudaBackend::host_free(void* p) {
  if (p == nullptr) return;
  // A copy queued from or to p may still be running. Unchecked: called from
  // destructors, and after a device fault there is nothing to wait for.
  cudaSetDevice(impl_->ctx.device());
  cudaStreamSynchronize(impl_->ctx.stream());
  cudaFreeHost(p);
  (void)cudaGetLastError();
}

CudaBackendStats CudaBackend::stats() const {
  CudaBackendStats s = impl_->stats;
  s.weight_bytes = impl_->weights.live_bytes();
  s.pool_bytes = impl_->pool_bytes;
  return s;
}

void* CudaBackend::allocate(size_t bytes) {
  Impl& m = *impl_;
  return m.guard([&] {
    m.use_device();
    void* p = nullptr;
    const size_t n = std::max<size_t>(bytes, 256);
    const cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(Errc::out_of_memory, "CUDA backend: cannot allocate " + std::to_string(bytes) + " bytes (" +
                                           cudaGetErrorString(e) + "), " + std::to_string(free_device_memory()) +
                                           " bytes free");
    }
    // Zeroed, so a KV page nobody wrote reads as 0, never as NaN garbage.
    TROUPE_CUDA_CHECK(cudaMemsetAsync(p, 0, n, m.ctx.stream()));
    TROUPE_CUDA_CHECK(cudaStreamSynchronize(m.ctx.stream()));
    m.pools[p] = n;
    m.pool_bytes += n;
    return p;
  });
}

void CudaBackend::deallocate(void* p) {
  if (p == nullptr) return;
  Impl& m = *impl_;
  // Queued ops may still read p. Teardown calls this (ModelStage's
  // destructor), also after a failed step or a device fault: failing to
  // drain the stream then is that step's error, already reported, and the
  // memory is freed all the same.
  try {
    m.sync_all();
  } catch (const std::exception&) {
    cudaStreamSynchronize(m.ctx.stream());
    (void)cudaGetLastError();
  }
  if (const auto it = m.pools.find(p); it != m.pools.end()) {
    m.pool_bytes -= it->second;
    m.pools.erase(it);
    cudaFree(p);  // fails only on a device that already failed
    (void)cudaGetLastError();
    return;
  }
  // A shared upload (a tied embedding) is freed with its last reference.
  if (const auto it = m.upload_refs.find(p); it != m.upload_refs.end()) {
    if (--it->second.second > 0) return;
    m.uploads.erase(it->second.first);
    m.upload_refs.erase(it);
  }
  if (!m.weights.release(p)) {
    throw Error(Errc::invalid_argument, "CUDA backend: deallocate of a pointer this backend did not allocate");
  }
}

Weight CudaBackend::upload_weight(const Weight& host) {
  Impl& m = *impl_;
  if (host.data == nullptr) return host;
  return m.guard([&] {
    m.use_device();
    if (is_device_pointer(host.data)) return host;  // built on the device (benchmarks): use in place
    if (host.n_in <= 0 || host.n_out <= 0) {
      throw Error(Errc::invalid_argument, "CUDA upload_weight: bad shape [" + std::to_string(host.n_out) + ", " +
                                              std::to_string(host.n_in) + "]");
    }
    // The same host tensor again (a tied embedding, which is also the output
    // head): one device copy, one more reference. Host weights are the
    // model's read-only mapped bytes, so the pointer names the contents.
    const Impl::UploadKey key{host.data, static_cast<int>(host.type), host.n_in, host.n_out};
    if (const auto it = m.uploads.find(key); it != m.uploads.end()) {
      ++m.upload_refs.at(it->second.data).second;
      return it->second;
    }
    const Weight out = m.upload_new(host);
    m.uploads.emplace(key, out);
    m.upload_refs.emplace(out.data, std::make_pair(key, 1));
    return out;
  });
}

Weight CudaBackend::Impl::upload_new(const Weight& host) {
  Impl& m = *this;
  cudaStream_t s = m.ctx.stream();
  Weight out = host;
  const bool convert = host.type == DType::f32 && host.n_out > 1 && m.opt.f32_weights != WeightPrecision::f32;
  if (!convert) {
    const size_t bytes = static_cast<size_t>(row_bytes(host.type, host.n_in) * host.n_out);
    void* dst = m.weights.alloc(bytes);
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, host.data, bytes, cudaMemcpyHostToDevice, s));
    TROUPE_CUDA_CHECK(cudaStreamSynchronize(s));
    out.data = dst;
    return out;
  }
  // f32 matrices become bf16 (or f16), rounded to nearest even on the host,
  // exactly as core/dtype converts them.
  const bool to_bf16 = m.opt.f32_weights == WeightPrecision::bf16;
  const size_t n = static_cast<size_t>(host.n_in * host.n_out);
  auto* dst = static_cast<uint16_t*>(m.weights.alloc(n * sizeof(uint16_t)));
  const auto* src = static_cast<const float*>(host.data);
  m.convert_buf.resize(std::min(n, kConvertChunk));
  for (size_t i = 0; i < n; i += kConvertChunk) {
    const size_t c = std::min(kConvertChunk, n - i);
    for (size_t j = 0; j < c; ++j) m.convert_buf[j] = to_bf16 ? f32_to_bf16(src[i + j]) : f32_to_fp16(src[i + j]);
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst + i, m.convert_buf.data(), c * sizeof(uint16_t), cudaMemcpyHostToDevice, s));
    TROUPE_CUDA_CHECK(cudaStreamSynchronize(s));  // the buffer is reused by the next chunk
  }
  out.data = dst;
  out.type = to_bf16 ? DType::bf16 : DType::f16;
  return out;
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  Impl& m = *impl_;
  m.guard([&] {
    m.flush();
    cudaStream_t s = m.ctx.stream();
    if (bytes == 0) return;
    // Pinned (host_alloc: a stage's hidden-state and logits buffers) or
    // large: straight into dst, DMA when pinned. Small pageable copies
    // bounce through the pinned readback buffer, which is faster than a
    // pageable copy of a few KB.
    const bool pinned = is_pinned_host(dst);
    if (!pinned && bytes <= m.readback_bytes) {
      TROUPE_CUDA_CHECK(cudaMemcpyAsync(m.readback, src, bytes, cudaMemcpyDeviceToHost, s));
      TROUPE_CUDA_CHECK(cudaStreamSynchronize(s));
      std::memcpy(dst, m.readback, bytes);
    } else {
      TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
      TROUPE_CUDA_CHECK(cudaStreamSynchronize(s));
      if (pinned) ++m.stats.direct_copies;
    }
    m.staging.reset();  // the stream is idle
  });
}

void CudaBackend::copy_from_host(void* dst, const void* src, size_t bytes) {
  Impl& m = *impl_;
  if (bytes == 0) return;
  m.guard([&] {
    // Pinned source (a hidden-state buffer from host_alloc): one async DMA
    // on the stream, after everything recorded so far and before what comes
    // next; the caller keeps src unchanged until the next copy_to_host or
    // synchronize. It is launched now rather than recorded, so a step's
    // graph does not depend on which pool buffer brought its input.
    if (is_pinned_host(src)) {
      m.flush();
      TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, m.ctx.stream()));
      ++m.stats.direct_copies;
      return;
    }
    // Small pageable copies are copied into pinned staging at once (src is
    // free on return) and join the recorded run; large ones go straight
    // through, synchronously.
    if (bytes <= m.staging.capacity() / 2) {
      const cuda::Staging::Slot slot = m.stage_host(cuda::StageTag::hidden, src, bytes);
      cuda::Op op(cuda::OpKind::h2d);
      op.h2d = {.dst = dst, .src = slot.host, .bytes = static_cast<int64_t>(bytes)};
      m.record(op);
      return;
    }
    m.sync_all();
    cudaStream_t s = m.ctx.stream();
    TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    TROUPE_CUDA_CHECK(cudaStreamSynchronize(s));
  });
}

void CudaBackend::synchronize() { impl_->sync_all(); }

Weight CudaBackend::random_weight(DType type, int64_t n_in, int64_t n_out, float scale, uint64_t seed) {
  Impl& m = *impl_;
  if (n_in <= 0 || n_out <= 0) throw Error(Errc::invalid_argument, "CUDA random_weight: bad shape");
  return m.guard([&] {
    m.sync_all();
    const int64_t n = n_in * n_out;
    void* p = m.weights.alloc(static_cast<size_t>(row_bytes(type, n_in) * n_out));
    cuda::fill_random(p, type, n, scale, seed, m.ctx.stream());
    TROUPE_CUDA_CHECK(cudaStreamSynchronize(m.ctx.stream()));
    return Weight{.data = p, .type = type, .n_in = n_in, .n_out = n_out};
  });
}

float* CudaBackend::constant_vector(int64_t n, float value) {
  Impl& m = *impl_;
  if (n <= 0) throw Error(Errc::invalid_argument, "CUDA constant_vector: bad length");
  return m.guard([&] {
    m.sync_all();
    auto* p = static_cast<float*>(m.weights.alloc(static_cast<size_t>(n) * sizeof(float)));
    cuda::fill(p, value, n, m.ctx.stream());
    TROUPE_CUDA_CHECK(cudaStreamSynchronize(m.ctx.stream()));
    return p;
  });
}

}  // namespace troupe
