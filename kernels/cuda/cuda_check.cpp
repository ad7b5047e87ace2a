// The error paths of cuda_check.hpp, out of line so the checks stay small.
#include "kernels/cuda/cuda_check.hpp"

#include <string>

#include "core/error.hpp"

namespace troupe::cuda {

void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line) {
  // Clears the (non-sticky) error so the next call does not see it again.
  (void)cudaGetLastError();
  const Errc kind = e == cudaErrorMemoryAllocation ? Errc::out_of_memory : Errc::internal;
  throw Error(kind, std::string("CUDA error ") + std::to_string(static_cast<int>(e)) + " (" + cudaGetErrorName(e) +
                        ": " + cudaGetErrorString(e) + ") in " + call + " at " + file + ":" + std::to_string(line));
}

void throw_cublas_error(cublasStatus_t s, const char* call, const char* file, int line) {
  const Errc kind = s == CUBLAS_STATUS_ALLOC_FAILED ? Errc::out_of_memory : Errc::internal;
  throw Error(kind, std::string("cuBLAS error ") + std::to_string(static_cast<int>(s)) + " (" +
                        cublasGetStatusString(s) + ") in " + call + " at " + file + ":" + std::to_string(line));
}

}  // namespace troupe::cuda
