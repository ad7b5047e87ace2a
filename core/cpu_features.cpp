// CPUID-based feature detection through the compiler's builtins.
#include "core/cpu_features.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "core/error.hpp"

namespace troupe {
namespace {

std::atomic<int> g_forced{-1};
std::atomic<bool> g_exact_math{false};
std::atomic<bool> g_batch_invariant{false};
std::atomic<bool> g_amx_on{true};
std::atomic<int> g_forced_dots{-1};
std::atomic<F32Precision> g_f32_precision{F32Precision::highest};

// Linux keeps AMX tile data out of a thread's saved state until the process
// asks for it; a tile instruction before that faults.
bool os_grants_amx() {
#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

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

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = isa_supported(Isa::avx512) && __builtin_cpu_supports("avx512vnni");
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = isa_supported(Isa::avx512) && __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

bool cpu_has_amx() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = isa_supported(Isa::avx512) && __builtin_cpu_supports("amx-tile") &&
                          __builtin_cpu_supports("amx-int8") && __builtin_cpu_supports("amx-bf16") &&
                          os_grants_amx();
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = isa_supported(Isa::avx2) && __builtin_cpu_supports("avxvnni");
  return has;
#else
  return false;
#endif
}

std::string_view dots256_name(Dots256 d) {
  switch (d) {
    case Dots256::pairs: return "vpmaddubsw";
    case Dots256::avx_vnni: return "AVX-VNNI";
    case Dots256::avx512_vnni: return "AVX-512 VNNI on ymm";
  }
  return "unknown";
}

bool dots256_supported(Dots256 d) {
  switch (d) {
    case Dots256::pairs: return isa_supported(Isa::avx2);
    case Dots256::avx_vnni: return cpu_has_avx_vnni();
    case Dots256::avx512_vnni: return cpu_has_avx512_vnni();
  }
  return false;
}

Dots256 dots256() {
  const int forced = g_forced_dots.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<Dots256>(forced);
  return cpu_has_avx_vnni() ? Dots256::avx_vnni : Dots256::pairs;
}

void force_dots256(std::optional<Dots256> d) {
  if (d && !dots256_supported(*d)) {
    throw Error(Errc::unsupported, "this CPU has no " + std::string(dots256_name(*d)) + " dot products");
  }
  g_forced_dots.store(d ? static_cast<int>(*d) : -1, std::memory_order_relaxed);
}

std::optional<Isa> parse_isa(std::string_view s) {
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (s == isa_name(isa)) return isa;
  }
  return std::nullopt;
}

std::optional<Dots256> parse_dots256(std::string_view s) {
  if (s == "pairs") return Dots256::pairs;
  if (s == "avx_vnni") return Dots256::avx_vnni;
  if (s == "avx512_vnni") return Dots256::avx512_vnni;
  return std::nullopt;
}

bool cpu_is_amd_family_19h() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool is = __builtin_cpu_is("amdfam19h");
  return is;
#else
  return false;
#endif
}

bool cpu_is_intel() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool is = __builtin_cpu_is("intel");
  return is;
#else
  return false;
#endif
}

int64_t cpu_l3_bytes() {
#if defined(__linux__) && defined(_SC_LEVEL3_CACHE_SIZE)
  static const int64_t bytes = std::max<long>(sysconf(_SC_LEVEL3_CACHE_SIZE), 0);
  return bytes;
#else
  return 0;
#endif
}

bool amx_enabled() {
  static const bool env_off = [] {
    const char* v = std::getenv("TROUPE_NO_AMX");
    return v != nullptr && v[0] != '\0' && v[0] != '0';
  }();
  return !env_off && g_amx_on.load(std::memory_order_relaxed) && cpu_has_amx();
}

void set_amx_enabled(bool on) { g_amx_on.store(on, std::memory_order_relaxed); }

bool batch_invariant() { return g_batch_invariant.load(std::memory_order_relaxed); }

void set_batch_invariant(bool on) { g_batch_invariant.store(on, std::memory_order_relaxed); }

bool exact_math() { return g_exact_math.load(std::memory_order_relaxed); }

void set_exact_math(bool on) { g_exact_math.store(on, std::memory_order_relaxed); }

std::string_view f32_precision_name(F32Precision p) {
  switch (p) {
    case F32Precision::highest: return "highest";
    case F32Precision::high: return "high";
    case F32Precision::medium: return "medium";
  }
  return "?";
}

std::optional<F32Precision> parse_f32_precision(std::string_view s) {
  for (F32Precision p : {F32Precision::highest, F32Precision::high, F32Precision::medium}) {
    if (s == f32_precision_name(p)) return p;
  }
  return std::nullopt;
}

F32Precision f32_matmul_precision() { return g_f32_precision.load(std::memory_order_relaxed); }

void set_f32_matmul_precision(F32Precision p) { g_f32_precision.store(p, std::memory_order_relaxed); }

std::string cpu_math_summary() {
  std::string s = std::string(isa_name(active_isa())) + " kernels, ";
  if (exact_math() || active_isa() == Isa::scalar) {
    return s + "f32 activations" + (exact_math() ? " (exact math)" : "");
  }
  if (active_isa() == Isa::avx2 || !cpu_has_avx512_vnni()) {  // the AVX2 kernels (int8_packed.hpp)
    return s + "int8 activations for quantized weights (" + std::string(dots256_name(dots256())) +
           " over packed lines), f32 and 16-bit weights in packed lines" +
           (batch_invariant() ? ", batch-invariant" : "");
  }
  const char* prefill = !amx_enabled() ? ")" : batch_invariant() ? ", AMX int8 prefill)" : ", AMX bf16 prefill)";
  s += std::string("int8 activations for quantized weights (VNNI") + prefill;
  if (cpu_has_avx512_bf16()) {
    s += amx_enabled() && !batch_invariant() ? ", bf16 for f16/bf16 weights (AMX prefill, vdpbf16ps decode)"
                                             : ", bf16 for f16/bf16 weights (vdpbf16ps)";
  } else {
    s += ", f16/bf16 weights in 16-bit packed lines";
  }
  s += ", f32 weights in packed lines";
  if (f32_matmul_precision() != F32Precision::highest && amx_enabled() && cpu_has_avx512_bf16() && !batch_invariant()) {
    s += " (" + std::string(f32_precision_name(f32_matmul_precision())) + " precision: AMX bf16 prefill)";
  }
  if (batch_invariant()) s += ", batch-invariant";
  return s;
}

}  // namespace troupe
