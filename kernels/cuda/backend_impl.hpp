// CudaBackend's private state, shared by its two source files: memory and
// the run loop (cuda_backend.cpp), and the op methods (backend_ops.cpp).
//
// How a step runs: every op method checks its arguments on the host, stages
// any host index arrays into pinned memory (Staging) and appends one record
// (ops.hpp) to `pending`. At a sync point (copy_to_host, synchronize, ...)
// flush() launches the pending run: replaying its CUDA graph when the same
// run was captured before, capturing it when it is seen the second time, or
// op by op. With graphs off, ops launch as they come, one op behind so that
// rope(q)+rope(k) and add+rmsnorm can still fuse.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kernels/cuda/attn_plan.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_context.hpp"
#include "kernels/cuda/device_pool.hpp"
#include "kernels/cuda/graph_cache.hpp"
#include "kernels/cuda/ops.hpp"
#include "kernels/cuda/staging.hpp"
#include "kernels/cuda_backend.hpp"

namespace troupe {

struct CudaBackend::Impl {
  explicit Impl(const CudaBackendOptions& options);
  ~Impl();

  // Appends a record (fusing it into the previous one when possible).
  void record(const cuda::Op& op);
  // Copies data into pinned staging (syncing first when it is full).
  cuda::Staging::Slot stage_host(cuda::StageTag tag, const void* data, size_t bytes);
  // The device address data will have once the (recorded) copy has run.
  const void* stage(cuda::StageTag tag, const void* data, size_t bytes);
  // Launches everything pending.
  void flush();
  // flush(), wait for the stream, then recycle the staging buffer.
  void sync_all();
  // Makes this backend's device current on the calling thread.
  void use_device() const;

  // Runs f, a public entry point's body. After a sticky CUDA error (the
  // context is gone) every later call fails at once with that error, code
  // unavailable, instead of reaching a device that can only fail.
  template <class F>
  decltype(auto) guard(F&& f) {
    check_fault();
    try {
      return f();
    } catch (const cuda::CudaError& e) {
      if (e.sticky() && fault.empty()) fault = e.what();
      throw;
    }
  }
  void check_fault() const;
  // Copies a host weight into the weight pool, converting f32 matrices as
  // the options say.
  Weight upload_new(const Weight& host);

  CudaBackendOptions opt;
  cuda::DeviceContext ctx;  // first member: destroyed last
  cuda::Staging staging;
  cuda::DevicePool weights;
  cuda::GraphCache graphs;
  void* readback = nullptr;  // pinned bounce buffer for small device->host copies
  size_t readback_bytes = 0;
  std::unordered_map<void*, size_t> pools;  // allocate()d blocks and their sizes
  size_t pool_bytes = 0;
  std::vector<cuda::Op> pending;
  std::vector<cuda::Op> running;
  bool mma_prefill = false;      // opt.prefill_attention resolved (env, device)
  bool capture_failed = false;  // graphs are off for good (logged once to stderr)
  std::string fault;            // the sticky CUDA error that made the device unusable
  // Uploaded weights by host source (pointer, dtype, n_in, n_out): a tied
  // embedding that is also the output head is uploaded once and shared.
  // Each upload_weight of it takes a reference; deallocate drops one.
  using UploadKey = std::tuple<const void*, int, int64_t, int64_t>;
  std::map<UploadKey, Weight> uploads;
  std::unordered_map<const void*, std::pair<UploadKey, int>> upload_refs;  // device pointer -> key, references
  CudaBackendStats stats;
  cuda::AttnPlan plan;                 // reused by every kv_write / attention
  std::vector<double> inv_freq;        // reused by every rope
  std::vector<uint16_t> convert_buf;   // f32 -> 16-bit weight conversion at upload
};

}  // namespace troupe
