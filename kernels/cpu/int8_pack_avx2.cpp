// Repacking of quantized weights into the int8 layouts
// (int8_packed_layout.hpp), for the VNNI and the AVX2 kernels alike. Built
// for AVX2: the weight readers that unpack the GGUF rows are AVX2; the
// layouts' writing is plain byte code.
#include "kernels/cpu/int8_packed.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/int8_packed_layout.hpp"

namespace troupe::kernels::detail {

int64_t int8_group_bytes(DType t, int64_t n_in) {
  int64_t bytes = 0;
  cpu::with_layout(t, [&]<class P>() { bytes = cpu::group_bytes<P>(n_in); });
  return bytes;
}

void pack_int8_groups(uint8_t* dst, const uint8_t* w, DType t, int64_t n_in, int64_t n_out, int64_t g0, int64_t g1) {
  using cpu::kGroupRows;
  const int64_t w_row = row_bytes(t, n_in);
  cpu::with_layout(t, [&]<class P>() {
    const int64_t n_units = n_in / P::kUnitK;
    const int64_t stride = cpu::group_bytes<P>(n_in);
    for (int64_t g = g0; g < g1; ++g) {
      const uint8_t* rows[kGroupRows] = {};
      const int nr = static_cast<int>(std::min<int64_t>(kGroupRows, n_out - g * kGroupRows));
      for (int r = 0; r < nr; ++r) rows[r] = w + (g * kGroupRows + r) * w_row;
      for (int64_t u = 0; u < n_units; ++u) P::pack_unit(rows, nr, u, dst + g * stride, n_units);
    }
  });
}

}  // namespace troupe::kernels::detail

#endif  // x86
