// y[n_tokens, n_out] = x[n_tokens, n_in] · W^T on one device: the dequantizing
// GEMV for small batches, cuBLAS with 16-bit inputs and fp32 accumulation
// otherwise. Used by CudaBackend and by the tensor-parallel layers.
#pragma once

#include <cstdint>

#include "kernels/backend.hpp"
#include "kernels/cuda/device_context.hpp"

namespace troupe::cuda {

// Queues the product on ctx's stream; scratch comes from ctx's workspace.
// x, y: f32 device memory; w: device weight in any weight dtype.
void matmul(const DeviceContext& ctx, float* y, const float* x, const Weight& w, int64_t n_tokens);

// Whether matmul() runs this product on the GEMV (few tokens, operands the
// GEMV takes): such matmuls of one x may be fused into one gemv_n launch.
bool matmul_takes_gemv(const void* w, DType type, const float* x, int64_t n_tokens, int64_t n_in);

// Workspace bytes matmul needs at least for this shape (prefill GEMMs of
// quantized weights dequantize in row tiles, so this is a floor, not a total).
size_t matmul_min_workspace(const Weight& w, int64_t n_tokens);

}  // namespace troupe::cuda
