// The error paths of cuda_check.hpp, out of line so the checks stay small.
#include "kernels/cuda/cuda_check.hpp"

#include <string>

namespace troupe::cuda {

bool is_sticky(cudaError_t e) {
  // The errors CUDA documents as leaving the context unusable, plus an
  // uncorrectable ECC error (the memory itself is bad).
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
    case cudaErrorContained:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line) {
  // Clears a non-sticky error so the next call does not see it again (a
  // sticky one stays: CUDA returns it from every later call).
  (void)cudaGetLastError();
  const bool sticky = is_sticky(e);
  const Errc kind = e == cudaErrorMemoryAllocation ? Errc::out_of_memory : Errc::unavailable;
  throw CudaError(kind,
                  std::string("CUDA error ") + std::to_string(static_cast<int>(e)) + " (" + cudaGetErrorName(e) +
                      ": " + cudaGetErrorString(e) + ") in " + call + " at " + file + ":" + std::to_string(line) +
                      (sticky ? "; the device is unusable until the process restarts" : ""),
                  sticky);
}

void throw_cublas_error(cublasStatus_t s, const char* call, const char* file, int line) {
  const Errc kind = s == CUBLAS_STATUS_ALLOC_FAILED ? Errc::out_of_memory : Errc::unavailable;
  // cuBLAS reports a kernel fault as EXECUTION_FAILED; whether the context
  // is gone shows in the runtime's own (sticky) error.
  const cudaError_t rt = cudaPeekAtLastError();
  const bool sticky = s == CUBLAS_STATUS_EXECUTION_FAILED && is_sticky(rt);
  throw CudaError(kind,
                  std::string("cuBLAS error ") + std::to_string(static_cast<int>(s)) + " (" +
                      cublasGetStatusString(s) + ") in " + call + " at " + file + ":" + std::to_string(line) +
                      (sticky ? std::string("; CUDA reports ") + cudaGetErrorName(rt) +
                                    ": the device is unusable until the process restarts"
                              : ""),
                  sticky);
}

}  // namespace troupe::cuda
