// Error checking for CUDA runtime and cuBLAS calls: a failed call becomes a
// troupe::Error (cuda::CudaError) naming the call, the file and line, and the
// CUDA message. Its code is out_of_memory for a failed allocation and
// unavailable for everything else: the device cannot run this step, and
// after a sticky error (an illegal address, a kernel fault) no later step
// either, which CudaBackend remembers (see Impl::guard).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"

namespace troupe::cuda {

class CudaError : public Error {
 public:
  CudaError(Errc code, const std::string& what, bool sticky) : Error(code, what), sticky_(sticky) {}
  // The CUDA context is corrupted: every later call on the device fails too
  // (CUDA's documentation: "the process must be terminated and relaunched").
  bool sticky() const { return sticky_; }

 private:
  bool sticky_;
};

bool is_sticky(cudaError_t e);

[[noreturn]] void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t s, const char* call, const char* file, int line);

inline void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) throw_cuda_error(e, call, file, line);
}
inline void check_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) throw_cublas_error(s, call, file, line);
}

}  // namespace troupe::cuda

#define TROUPE_CUDA_CHECK(call) ::troupe::cuda::check_cuda((call), #call, __FILE__, __LINE__)
#define TROUPE_CUBLAS_CHECK(call) ::troupe::cuda::check_cublas((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch-configuration errors surface here, not later.
#define TROUPE_CUDA_CHECK_LAUNCH() TROUPE_CUDA_CHECK(cudaGetLastError())
