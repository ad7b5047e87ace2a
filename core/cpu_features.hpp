// Run-time choice of the SIMD path for CPU kernels. One binary carries a
// portable path, an AVX2+FMA path and an AVX-512 path; the best one the CPU
// supports is used unless a test or a setting forces another.
#pragma once

#include <string_view>

namespace troupe {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2 };

std::string_view isa_name(Isa isa);
// Whether this CPU (and OS) can run the path.
bool isa_supported(Isa isa);
// The best supported path.
Isa best_isa();
// The path kernels use now: best_isa() unless forced.
Isa active_isa();
// Forces a path (tests, `--isa`). Throws Error(unsupported) if the CPU lacks it.
void force_isa(Isa isa);

}  // namespace troupe
