// DeviceContext: stream, cuBLAS handle and workspaces of one device.
#include "kernels/cuda/device_context.hpp"

#include <string>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace troupe::cuda {
namespace {
constexpr size_t kCublasWorkspace = size_t{32} << 20;  // what cuBLAS asks for on Hopper
}  // namespace

DeviceContext::DeviceContext(int device, size_t workspace_bytes) : device_(device), workspace_bytes_(workspace_bytes) {
  TROUPE_CUDA_CHECK(cudaSetDevice(device));
  TROUPE_CUDA_CHECK(cudaDeviceGetAttribute(&n_sm_, cudaDevAttrMultiProcessorCount, device));
  TROUPE_CUDA_CHECK(cudaDeviceGetAttribute(&cc_major_, cudaDevAttrComputeCapabilityMajor, device));
  TROUPE_CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin_, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  try {
    TROUPE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TROUPE_CUBLAS_CHECK(cublasCreate(&cublas_));
    TROUPE_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    // Plain fp32 math for fp32 GEMMs (no silent TF32); 16-bit inputs still
    // use tensor cores with fp32 accumulation.
    TROUPE_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
    TROUPE_CUDA_CHECK(cudaMalloc(&cublas_workspace_, kCublasWorkspace));
    TROUPE_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspace));
    if (workspace_bytes_ > 0) TROUPE_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
  } catch (...) {
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    cudaFree(cublas_workspace_);
    throw;
  }
}

DeviceContext::~DeviceContext() {
  cudaSetDevice(device_);
  cudaStreamSynchronize(stream_);
  cublasDestroy(cublas_);
  cudaStreamDestroy(stream_);
  cudaFree(cublas_workspace_);
  cudaFree(workspace_);
}

void* Scratch::take(size_t bytes, const char* what) {
  constexpr size_t kAlign = 256;
  const size_t start = (used_ + kAlign - 1) / kAlign * kAlign;
  if (start > cap_ || bytes > cap_ - start) {
    throw Error(Errc::out_of_memory, std::string("CUDA workspace too small for ") + what + ": need " +
                                         std::to_string(start + bytes) + " bytes, have " + std::to_string(cap_) +
                                         " (raise CudaBackendOptions.workspace_bytes)");
  }
  used_ = start + bytes;
  return base_ + start;
}

}  // namespace troupe::cuda
