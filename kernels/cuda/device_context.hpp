// What every op on one device needs: the stream ops are queued on, a cuBLAS
// handle bound to it, and a workspace that one op at a time uses as scratch
// (ops on one stream run in order, so they can all start at its base).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace troupe::cuda {

class DeviceContext {
 public:
  // Selects `device`, creates the stream and cuBLAS handle and allocates the
  // workspace (plus cuBLAS's own, so GEMMs can be captured in graphs).
  DeviceContext(int device, size_t workspace_bytes);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  int n_sm() const { return n_sm_; }
  int cc_major() const { return cc_major_; }  // compute capability, major
  // Shared memory a block may have by opting in (227 KB on sm_90, 99 KB on sm_86/89).
  int smem_optin_bytes() const { return smem_optin_; }
  // The block types' single-token GEMV stages activations in shared memory
  // (gemv_staged.cu); set by the backend from its options.
  bool gemv_staging() const { return gemv_staging_; }
  void set_gemv_staging(bool on) { gemv_staging_ = on; }
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  void* cublas_workspace_ = nullptr;
  int n_sm_ = 0;
  int cc_major_ = 0;
  int smem_optin_ = 0;
  bool gemv_staging_ = false;
};

// Bump allocation inside the workspace for the op being launched.
class Scratch {
 public:
  Scratch(void* base, size_t bytes) : base_(static_cast<char*>(base)), cap_(bytes) {}
  explicit Scratch(const DeviceContext& ctx) : Scratch(ctx.workspace(), ctx.workspace_bytes()) {}
  // 256-byte aligned; throws Error(out_of_memory) naming `what` past the end.
  void* take(size_t bytes, const char* what);
  size_t left() const { return cap_ - used_; }

 private:
  char* base_;
  size_t cap_;
  size_t used_ = 0;
};

}  // namespace troupe::cuda
