// CPUID-based feature detection through the compiler's builtins.
#include "core/cpu_features.hpp"

#include <atomic>
#include <string>

#include "core/error.hpp"

namespace troupe {
namespace {

std::atomic<int> g_forced{-1};

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "unknown";
}

bool isa_supported(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  switch (isa) {
    case Isa::scalar: return true;
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Isa::avx512:
      return isa_supported(Isa::avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  }
  return false;
#else
  return isa == Isa::scalar;
#endif
}

Isa best_isa() {
  static const Isa best = isa_supported(Isa::avx512) ? Isa::avx512
                          : isa_supported(Isa::avx2) ? Isa::avx2
                                                     : Isa::scalar;
  return best;
}

Isa active_isa() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  return forced >= 0 ? static_cast<Isa>(forced) : best_isa();
}

void force_isa(Isa isa) {
  if (!isa_supported(isa)) {
    throw Error(Errc::unsupported, "this CPU cannot run the " + std::string(isa_name(isa)) + " kernels");
  }
  g_forced.store(static_cast<int>(isa), std::memory_order_relaxed);
}

}  // namespace troupe
