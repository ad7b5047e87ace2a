// Token embedding lookup: copies (dequantizing when the table is f16, bf16 or
// a GGUF block format) one table row per token id.
#include <string>

#include "core/error.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe::kernels {

void embedding(float* y, const void* table, DType t, const int32_t* ids, int64_t n_tokens, int64_t n_embd) {
  if (n_tokens < 0 || n_embd <= 0) {
    throw Error(Errc::invalid_argument, "embedding: bad shape n_tokens=" + std::to_string(n_tokens) +
                                            " n_embd=" + std::to_string(n_embd));
  }
  if (n_tokens == 0) return;
  if (y == nullptr || table == nullptr || ids == nullptr) {
    throw Error(Errc::invalid_argument, "embedding: null output, table or ids");
  }
  // Throws when n_embd is not a whole number of the dtype's blocks.
  const int64_t stride = row_bytes(t, n_embd);
  const auto* base = static_cast<const unsigned char*>(table);
  for (int64_t i = 0; i < n_tokens; ++i) {
    // The table's row count is the caller's to check; a negative id is
    // always wrong and would read before the table.
    if (ids[i] < 0) {
      throw Error(Errc::invalid_argument, "embedding: token id " + std::to_string(ids[i]) + " at position " +
                                              std::to_string(i) + " is negative");
    }
    dequantize_row(t, base + static_cast<int64_t>(ids[i]) * stride, y + i * n_embd, n_embd);
  }
}

}  // namespace troupe::kernels
