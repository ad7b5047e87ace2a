// Per-thread grow-only scratch of the CPU matmul paths, 64-byte aligned,
// valid until the same thread asks for the same slot again. Activations are
// converted by the calling thread and read by every worker; panels and
// expanded groups are each worker's own.
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe::kernels::detail {

enum class Scratch {
  f32_panel,    // a weight panel dequantized to f32 (the exact GEMM)
  int8_acts,    // quantized activations (matmul_int8.hpp)
  int8_panel,   // a group unpacked to an int8 panel for the VNNI/AMX GEMM
  bf16_acts,    // activations rounded to bf16 (bf16_packed.hpp)
  bf16_groups,  // quantized groups expanded to bf16 for the AMX prefill
  conv_owner,   // the short convolution's sequence of each token row (short_conv.cpp)
  conv_window,  // its rows of b*x, the written one or each worker's taps
};

uint8_t* scratch(Scratch slot, size_t bytes);

}  // namespace troupe::kernels::detail
