// The LDTILECFG memory layout (palette 1) shared by the AMX kernels
// (matmul_int8_amx.cpp, matmul_bf16_amx.cpp).
#pragma once

#include <cstdint>

namespace troupe::kernels::detail {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of each tile
  uint8_t rows[16] = {};
};

}  // namespace troupe::kernels::detail
