// troupe::kernels::matmul: argument checks, the split of output rows across
// the thread pool, the choice of SIMD path (core/cpu_features) and the
// portable scalar path, which is also the fallback on non-x86 machines.
#include <algorithm>
#include <cstddef>
#include <string>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/matmul_impl.hpp"
#include "kernels/cpu/matmul_int8.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe::kernels {
namespace detail {
namespace {

// Eight partial sums in a fixed order: lets the compiler use SIMD registers
// without reassociating, and keeps rounding error growth at ~n/8 terms.
float dot_scalar(const float* a, const float* b, int64_t n) {
  float s[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) s[j] += a[i] * b[i];
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

}  // namespace

float* matmul_scratch(int64_t n) {
  return reinterpret_cast<float*>(scratch(Scratch::f32_panel, static_cast<size_t>(n) * sizeof(float)));
}

void matmul_rows_scalar(const MatmulProblem& p, int64_t row_begin, int64_t row_end) {
  // Dequantize each weight row once (exactly, as dequantize_row does), then
  // dot it with every token.
  float* wrow = matmul_scratch(p.n_in);
  for (int64_t r = row_begin; r < row_end; ++r) {
    dequantize_row(p.wtype, p.w + r * p.w_row_bytes, wrow, p.n_in);
    for (int64_t t = 0; t < p.n_tokens; ++t) {
      p.y[t * p.n_out + r] = dot_scalar(p.x + t * p.n_in, wrow, p.n_in);
    }
  }
}

// Every GGUF block type has an int8 reader (int8_readers.hpp).
bool int8_supports(DType t) { return is_quantized(t); }

}  // namespace detail

void matmul(float* y, const float* x, const void* w, DType wtype, int64_t n_tokens, int64_t n_in, int64_t n_out,
            ThreadPool& pool) {
  if (n_tokens < 0 || n_in < 0 || n_out < 0) {
    throw Error(Errc::invalid_argument, "matmul: negative shape (n_tokens " + std::to_string(n_tokens) + ", n_in " +
                                            std::to_string(n_in) + ", n_out " + std::to_string(n_out) + ")");
  }
  const DTypeInfo& info = dtype_info(wtype);  // throws for an unknown dtype
  if (n_in % info.block_size != 0) {
    throw Error(Errc::invalid_argument, "matmul: n_in " + std::to_string(n_in) + " is not a multiple of the " +
                                            std::string(info.name) + " block size " +
                                            std::to_string(info.block_size));
  }
  if (n_tokens == 0 || n_out == 0) return;
  if (y == nullptr || (n_in > 0 && (x == nullptr || w == nullptr))) {
    throw Error(Errc::invalid_argument, "matmul: null y, x or w pointer");
  }
  if (n_in == 0) {  // an empty sum
    std::fill(y, y + n_tokens * n_out, 0.0f);
    return;
  }

  const detail::MatmulProblem p{
      .y = y,
      .x = x,
      .w = static_cast<const uint8_t*>(w),
      .wtype = wtype,
      .n_tokens = n_tokens,
      .n_in = n_in,
      .n_out = n_out,
      .w_row_bytes = row_bytes(wtype, n_in),
  };

  // Each thread takes a contiguous run of whole row units, so every weight
  // row is streamed from memory by exactly one thread.
  const int64_t unit = detail::kMatmulRowUnit;
  const int64_t n_units = (n_out + unit - 1) / unit;
#if defined(__x86_64__) || defined(__i386__)
  if (!exact_math() && detail::int8_supports(wtype)) {
    if (active_isa() == Isa::avx512 && cpu_has_avx512_vnni()) {
      detail::matmul_int8(p, pool);
      return;
    }
    if (active_isa() == Isa::avx2 && (n_tokens < detail::kAvx2GemmMinTokens || batch_invariant())) {
      detail::matmul_int8_avx2(p, pool);
      return;
    }
  }
#endif
  void (*rows_fn)(const detail::MatmulProblem&, int64_t, int64_t) = detail::matmul_rows_scalar;
#if defined(__x86_64__) || defined(__i386__)
  switch (active_isa()) {
    case Isa::avx512: rows_fn = detail::matmul_rows_avx512; break;
    case Isa::avx2: rows_fn = detail::matmul_rows_avx2; break;
    case Isa::scalar: break;
  }
#endif

  if (batch_invariant() && n_tokens > 1) {
    // A token's bits must not depend on its batch: the row kernels sum a
    // lone token (a decode) with two accumulators, a group of tokens with
    // one, and many tokens through the GEMM's tiles. Each token runs alone.
    pool.parallel_for(n_units, [&](int64_t u0, int64_t u1) {
      for (int64_t t = 0; t < n_tokens; ++t) {
        detail::MatmulProblem one = p;
        one.x = x + t * n_in;
        one.y = y + t * n_out;
        one.n_tokens = 1;
        rows_fn(one, u0 * unit, std::min(u1 * unit, n_out));
      }
    });
    return;
  }
  pool.parallel_for(n_units, [&](int64_t u0, int64_t u1) {
    rows_fn(p, u0 * unit, std::min(u1 * unit, n_out));
  });
}

}  // namespace troupe::kernels
