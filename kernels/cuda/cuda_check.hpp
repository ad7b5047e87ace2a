// Error checking for CUDA runtime and cuBLAS calls: a failed call becomes a
// troupe::Error naming the call, the file and line, and the CUDA message.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace troupe::cuda {

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
