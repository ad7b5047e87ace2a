// The matmul dispatch. Activations are f32 in the model; for the tensor-core
// GEMM they are converted to the weight's 16-bit type by a small kernel into
// the workspace (bf16 for bf16 and quantized weights, f16 for f16 weights),
// and cuBLAS accumulates in fp32 and writes f32 directly (cublasGemmEx with
// an f32 C): one extra pass over the activations, which are small next to
// the weights, instead of a mixed-input GEMM cuBLAS does not offer.
// Quantized weights (q8_0/q4_0/q4_1) are dequantized to bf16 in row tiles
// that fit the workspace. f32 weights (kept only on request) use plain SGEMM.
//
// Row-major y[T, N] = x[T, K] · W[N, K]^T is, in cuBLAS's column-major terms,
// Y(N x T) = W^T (N x K, W stored K x N with ld K) · X (K x T, ld K).
#include "kernels/cuda/matmul.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launchers.hpp"

namespace troupe::cuda {
namespace {

constexpr int64_t kMinTileRows = 64;

// Steps of up to this many tokens take the GEMV, larger ones cuBLAS:
// kGemvMaxTokens, or TROUPE_CUDA_GEMV_MAX_TOKENS (0 to kGemvMaxTokens) to
// compare the two paths on a GPU (bench_cuda) without a rebuild.
int64_t gemv_max_tokens() {
  static const int64_t n = [] {
    const char* s = std::getenv("TROUPE_CUDA_GEMV_MAX_TOKENS");
    if (s == nullptr || *s == '\0') return kGemvMaxTokens;
    return std::clamp<int64_t>(std::strtol(s, nullptr, 10), 0, kGemvMaxTokens);
  }();
  return n;
}

void check_int(const char* what, int64_t v) {
  if (v > std::numeric_limits<int>::max()) {
    throw Error(Errc::unsupported, std::string("cuda matmul: ") + what + " " + std::to_string(v) +
                                       " exceeds cuBLAS's 32-bit dimensions");
  }
}

void gemm_16bit(const DeviceContext& ctx, float* y, const void* w, const void* x16, cudaDataType_t type, int64_t n_rows,
                int64_t n_tokens, int64_t n_in, int64_t ldc) {
  const float alpha = 1.0f, beta = 0.0f;
  TROUPE_CUBLAS_CHECK(cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n_rows),
                                   static_cast<int>(n_tokens), static_cast<int>(n_in), &alpha, w, type,
                                   static_cast<int>(n_in), x16, type, static_cast<int>(n_in), &beta, y, CUDA_R_32F,
                                   static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

bool matmul_takes_gemv(const void* w, DType type, const float* x, int64_t n_tokens, int64_t n_in) {
  return n_tokens <= gemv_max_tokens() && gemv_supported(w, type, x, n_tokens, n_in);
}

size_t matmul_min_workspace(const Weight& w, int64_t n_tokens) {
  if (w.type == DType::f32) return 0;
  const size_t act = static_cast<size_t>(n_tokens * w.n_in) * 2 + 256;
  if (!is_quantized(w.type)) return act;
  return act + static_cast<size_t>(std::min(w.n_out, kMinTileRows) * w.n_in) * 2 + 256;
}

void matmul(const DeviceContext& ctx, float* y, const float* x, const Weight& w, int64_t n_tokens) {
  if (n_tokens < 0 || w.n_in <= 0 || w.n_out <= 0 || w.data == nullptr) {
    throw Error(Errc::invalid_argument, "cuda matmul: bad operands (" + std::string(dtype_name(w.type)) + " [" +
                                            std::to_string(w.n_out) + ", " + std::to_string(w.n_in) +
                                            "], n_tokens=" + std::to_string(n_tokens) + ")");
  }
  if (n_tokens == 0) return;
  row_bytes(w.type, w.n_in);  // throws unless rows are whole blocks
  cudaStream_t stream = ctx.stream();

  if (matmul_takes_gemv(w.data, w.type, x, n_tokens, w.n_in)) {
    if (ctx.gemv_staging() && gemv_staged_supported(w.type, n_tokens)) {
      gemv_staged(y, x, w.data, w.type, w.n_in, w.n_out, stream);
    } else {
      gemv(y, x, w.data, w.type, n_tokens, w.n_in, w.n_out, stream);
    }
    return;
  }
  check_int("n_out", w.n_out);
  check_int("n_in", w.n_in);
  check_int("n_tokens", n_tokens);

  if (w.type == DType::f32) {
    const float alpha = 1.0f, beta = 0.0f;
    TROUPE_CUBLAS_CHECK(cublasSgemm(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.n_out),
                                    static_cast<int>(n_tokens), static_cast<int>(w.n_in), &alpha,
                                    static_cast<const float*>(w.data), static_cast<int>(w.n_in), x,
                                    static_cast<int>(w.n_in), &beta, y, static_cast<int>(w.n_out)));
    return;
  }

  Scratch scratch(ctx);
  const DType act_type = w.type == DType::f16 ? DType::f16 : DType::bf16;
  const cudaDataType_t cublas_type = act_type == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  void* x16 = scratch.take(static_cast<size_t>(n_tokens * w.n_in) * 2, "16-bit activations");
  convert_f32(x16, act_type, x, n_tokens * w.n_in, stream);

  if (!is_quantized(w.type)) {
    gemm_16bit(ctx, y, w.data, x16, cublas_type, w.n_out, n_tokens, w.n_in, w.n_out);
    return;
  }
  // Quantized: dequantize as many rows at a time as the workspace holds.
  const size_t row16 = static_cast<size_t>(w.n_in) * 2;
  const int64_t fit = static_cast<int64_t>(scratch.left() > 256 ? (scratch.left() - 256) / row16 : 0);
  // Tiles of whole multiples of 8 rows keep each tile's output 32-byte aligned.
  const int64_t tile = fit >= w.n_out ? w.n_out : fit / 8 * 8;
  if (tile < std::min(w.n_out, kMinTileRows)) {
    throw Error(Errc::out_of_memory, "cuda matmul: workspace too small to dequantize " + std::string(dtype_name(w.type)) +
                                         " rows of " + std::to_string(w.n_in) +
                                         " (raise CudaBackendOptions.workspace_bytes)");
  }
  auto* w16 = static_cast<uint16_t*>(scratch.take(static_cast<size_t>(tile) * row16, "dequantized weight tile"));
  const int64_t rb = row_bytes(w.type, w.n_in);
  for (int64_t r0 = 0; r0 < w.n_out; r0 += tile) {
    const int64_t n = std::min(tile, w.n_out - r0);
    dequantize_rows_bf16(w16, static_cast<const unsigned char*>(w.data) + r0 * rb, w.type, n, w.n_in, stream);
    gemm_16bit(ctx, y + r0, w16, x16, CUDA_R_16BF, n, n_tokens, w.n_in, w.n_out);
  }
}

}  // namespace troupe::cuda
