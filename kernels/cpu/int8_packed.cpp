// The int8 path over repacked weights (int8_packed.hpp): which ISA's
// kernels run it, the repacking split over the pool, and fused matmuls cut
// into calls of at most kMaxPackedOutputs matrices. Built without ISA flags:
// it runs on every CPU and calls the per-ISA files only where they run.
#include "kernels/cpu/int8_packed.hpp"

#include <algorithm>
#include <atomic>
#include <string>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/matmul_int8.hpp"
#include "kernels/cpu/packed_groups.hpp"
#include "kernels/cpu/scratch.hpp"

namespace troupe::kernels {
namespace {

enum class Int8Kernels { none, ymm, vnni };

std::atomic<int64_t> g_int8_packed_bytes{0};

// The kernels at the active ISA. AVX-512 without VNNI (Skylake-SP/X) runs
// the 256-bit ones: on one Zen 4 core the AVX-512 f32 path it ran before
// decoded 110M q4_K_M at 47-49 tok/s, the AVX2 int8 kernels at 242-247
// (docs/performance.md).
Int8Kernels int8_kernels() {
#if defined(__x86_64__) || defined(__i386__)
  switch (active_isa()) {
    case Isa::avx512: return cpu_has_avx512_vnni() ? Int8Kernels::vnni : Int8Kernels::ymm;
    case Isa::avx2: return Int8Kernels::ymm;
    case Isa::scalar: break;
  }
#endif
  return Int8Kernels::none;
}

// The 256-bit kernels for the dot products in use (core/cpu_features.hpp).
void matmul_int8_packed_ymm(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens,
                            int64_t n_in, ThreadPool& pool) {
  switch (dots256()) {
    case Dots256::pairs: detail::matmul_int8_packed_avx2(outs, x, t, n_tokens, n_in, pool); return;
    case Dots256::avx_vnni: detail::matmul_int8_packed_avxvnni(outs, x, t, n_tokens, n_in, pool); return;
    case Dots256::avx512_vnni: detail::matmul_int8_packed_vnni256(outs, x, t, n_tokens, n_in, pool); return;
  }
}

}  // namespace

void count_int8_packed_bytes(int64_t delta) { g_int8_packed_bytes.fetch_add(delta, std::memory_order_relaxed); }

bool int8_packing_available(DType t) { return detail::int8_supports(t) && int8_kernels() != Int8Kernels::none; }

int64_t int8_packed_bytes(DType t, int64_t n_in, int64_t n_out) {
  if (!int8_packing_available(t)) return 0;
  return detail::n_packed_groups(n_out) * detail::int8_group_bytes(t, n_in);
}

void pack_int8(void* dst, const void* w, DType t, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  if (!int8_packing_available(t)) {
    throw Error(Errc::unsupported,
                "int8 repacking of " + std::string(dtype_name(t)) + " needs AVX2 or AVX-512 VNNI, and the int8 path");
  }
  if (n_in % dtype_info(t).block_size != 0 || n_in <= 0 || n_out <= 0) {
    throw Error(Errc::invalid_argument, "int8 repacking: bad shape [" + std::to_string(n_out) + ", " +
                                            std::to_string(n_in) + "] for " + std::string(dtype_name(t)));
  }
  pool.parallel_for(detail::n_packed_groups(n_out), [&](int64_t g0, int64_t g1) {
    detail::pack_int8_groups(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(w), t, n_in, n_out, g0, g1);
  });
}

void matmul_int8_packed_n(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens,
                          int64_t n_in, ThreadPool& pool) {
  if (n_tokens <= 0 || outs.empty()) return;
  const Int8Kernels k = int8_kernels();
  if (k == Int8Kernels::none || !detail::int8_supports(t)) {
    throw Error(Errc::unsupported, "int8 matmul of " + std::string(dtype_name(t)) + " over repacked weights needs " +
                                       "AVX2 or AVX-512 VNNI at the active ISA");
  }
  for (size_t i = 0; i < outs.size(); i += kMaxPackedOutputs) {
    const auto part = outs.subspan(i, std::min(kMaxPackedOutputs, outs.size() - i));
    if (k == Int8Kernels::vnni) {
      detail::matmul_int8_packed_vnni(part, x, t, n_tokens, n_in, pool);
    } else {
      matmul_int8_packed_ymm(part, x, t, n_tokens, n_in, pool);
    }
  }
}

void matmul_int8_packed(float* y, const float* x, const void* packed, DType t, int64_t n_tokens, int64_t n_in,
                        int64_t n_out, ThreadPool& pool) {
  if (n_out <= 0) return;
  const PackedOutput out{.y = y, .packed = packed, .n_out = n_out};
  matmul_int8_packed_n(std::span(&out, 1), x, t, n_tokens, n_in, pool);
}

}  // namespace troupe::kernels

namespace troupe::kernels::detail {

// AMD family 19h (Zen 3, Zen 4): 4 KiB ahead, where a group on read at
// 0.71-0.85 of a plain read and 4 KiB at 0.94-1.03 (1B shapes over DRAM).
// Intel with more int8 weights than L3: 2 KiB ahead. On a Xeon with AMX the
// 1B GEMVs over DRAM read at 0.62-0.74 of a plain read a group on and at
// 0.78-0.92 2 KiB ahead (q8_0, q4_0, q4_K, q6_K; 1 and 4 KiB between), and
// 1B decode ran 13-25% faster; but the 110M q4_0 model, which that L3 holds,
// decoded 8-16% slower, so weights that fit keep a group on. Elsewhere a
// group on (docs/performance.md, "An Intel Xeon with AMX").
uintptr_t packed_gemv_prefetch_ahead() {
  constexpr uintptr_t kAmd19h = 4096, kIntelFromDram = 2048;
  if (cpu_is_amd_family_19h()) return kAmd19h;
  static const int64_t l3 = cpu_is_intel() ? cpu_l3_bytes() : 0;
  return l3 > 0 && g_int8_packed_bytes.load(std::memory_order_relaxed) > l3 ? kIntelFromDram : 0;
}

Int8Panel int8_panel_scratch(int64_t n_in, int64_t sub_k, int32_t offset, bool has_min) {
  Int8Panel pn;
  pn.sub_k = sub_k;
  pn.n_sub = n_in / sub_k;
  pn.offset = offset;
  const size_t u_bytes = static_cast<size_t>(n_in) * kPanelRows;
  const size_t f_bytes = static_cast<size_t>(pn.n_sub) * kPanelRows * sizeof(float);
  uint8_t* mem = scratch(Scratch::int8_panel, u_bytes + 2 * f_bytes);
  pn.u = mem;
  pn.scale = reinterpret_cast<float*>(mem + u_bytes);
  pn.min = has_min ? reinterpret_cast<float*>(mem + u_bytes + f_bytes) : nullptr;
  return pn;
}

}  // namespace troupe::kernels::detail

#if !defined(__x86_64__) && !defined(__i386__)
// No x86: no int8 path; int8_kernels() is none, so these are never reached.
namespace troupe::kernels::detail {
int64_t int8_group_bytes(DType, int64_t) { return 0; }
void pack_int8_groups(uint8_t*, const uint8_t*, DType t, int64_t, int64_t, int64_t, int64_t) {
  throw Error(Errc::unsupported, "int8 repacking of " + std::string(dtype_name(t)) + " needs x86");
}
void matmul_int8_packed_vnni(std::span<const PackedOutput>, const float*, DType t, int64_t, int64_t, ThreadPool&) {
  throw Error(Errc::unsupported, "int8 matmul of " + std::string(dtype_name(t)) + " needs x86");
}
void matmul_int8_packed_avx2(std::span<const PackedOutput>, const float*, DType t, int64_t, int64_t, ThreadPool&) {
  throw Error(Errc::unsupported, "int8 matmul of " + std::string(dtype_name(t)) + " needs x86");
}
void matmul_int8_packed_avxvnni(std::span<const PackedOutput>, const float*, DType t, int64_t, int64_t, ThreadPool&) {
  throw Error(Errc::unsupported, "int8 matmul of " + std::string(dtype_name(t)) + " needs x86");
}
void matmul_int8_packed_vnni256(std::span<const PackedOutput>, const float*, DType t, int64_t, int64_t, ThreadPool&) {
  throw Error(Errc::unsupported, "int8 matmul of " + std::string(dtype_name(t)) + " needs x86");
}
}  // namespace troupe::kernels::detail
#endif
