// Run-time choice of the SIMD path for CPU kernels. One binary carries a
// portable path, an AVX2+FMA path and an AVX-512 path; the best one the CPU
// supports is used unless a test or a setting forces another.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
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
// "scalar", "avx2" or "avx512" (isa_name's; the CLI's and benchmarks'
// --isa); nullopt for anything else.
std::optional<Isa> parse_isa(std::string_view s);

// Extensions used beside the AVX-512 path, each checked with the OS's consent:
// int8 dot products (vpdpbusd) and AMX tiles (int8 and bf16; on Linux the
// first call asks for the tile state with arch_prctl(ARCH_REQ_XCOMP_PERM)
// and reports false if refused).
bool cpu_has_avx512_vnni();
// bf16 dot products (vdpbf16ps): the bf16 path for f16/bf16 weights.
bool cpu_has_avx512_bf16();
bool cpu_has_amx();
// AVX-VNNI: vpdpbusd on 256-bit registers in its VEX form (Intel client
// cores from Alder Lake, Sierra Forest, Zen 5), without AVX-512.
bool cpu_has_avx_vnni();
// The integer dot products of the 256-bit int8 kernels, which run quantized
// weights on the AVX2 path and on AVX-512 without VNNI: vpmaddubsw pairs
// summed in int16 on any AVX2 CPU, or vpdpbusd on ymm in AVX-VNNI's VEX form
// or AVX-512 VNNI's EVEX form. All give the same bits. The default is
// avx_vnni where the CPU has it, else pairs; avx512_vnni only when forced
// (where AVX-512 VNNI is, the zmm kernels run), so that tests and benchmarks
// run the vpdpbusd kernels on such CPUs.
enum class Dots256 { pairs, avx_vnni, avx512_vnni };
std::string_view dots256_name(Dots256 d);
bool dots256_supported(Dots256 d);
Dots256 dots256();
// Forces a kind (tests, benchmarks), or the default again with nullopt.
// Throws Error(unsupported) if the CPU lacks it.
void force_dots256(std::optional<Dots256> d);
// "pairs", "avx_vnni" or "avx512_vnni" (benchmarks' --dots256); nullopt for
// anything else.
std::optional<Dots256> parse_dots256(std::string_view s);
// An AMD family 19h core (Zen 3, or with AVX-512 Zen 4): the int8 GEMV
// prefetches nearer on it (matmul_packed_vnni.cpp says why).
bool cpu_is_amd_family_19h();
// An Intel CPU (GenuineIntel), and its last-level cache in bytes as the OS
// reports it (0 where it does not): the int8 GEMV's prefetch distance
// depends on whether the weights fit there (kernels/cpu/packed_groups.hpp).
bool cpu_is_intel();
int64_t cpu_l3_bytes();
// Whether the AMX kernels may be used: cpu_has_amx() and not turned off
// (tests compare the two paths; `TROUPE_NO_AMX=1` turns it off for a run).
bool amx_enabled();
void set_amx_enabled(bool on);

// Exact math: matmuls keep f32 activations and agree with the dequantized
// product to float rounding. Off (the default), matmuls over quantized
// weights quantize each activation row to int8 blocks once per matmul and use
// integer dot products, as llama.cpp does, and, where AMX runs, matmuls over
// f16/bf16 weights round activations (and f16 weights) to bf16 for bf16 dot
// products: faster, within that rounding. Process-wide; `--exact-math` turns it on.
bool exact_math();
void set_exact_math(bool on);

// Batch-invariant math: a token's results do not depend on how many tokens
// share its step (16 or more put the fast paths' prefill on AMX bf16 tiles,
// and 8 query rows or more put attention on the lane kernel, whose bits
// differ from decode's). On, prefill over quantized weights keeps the int8
// kernels' arithmetic (int8 AMX tiles), f16/bf16 weights stay on vdpbf16ps
// and attention on its tile kernels: slower prefill, and greedy output that
// no batching or speculation changes. Process-wide; `--batch-invariant`
// turns it on.
bool batch_invariant();
void set_batch_invariant(bool on);

// How a prefill over f32 weights may round, as PyTorch's
// torch.set_float32_matmul_precision names it. highest (the default): f32
// products, the weights as stored. Where AMX runs (16 tokens or more, not
// batch-invariant), high splits each operand into a bf16 high part and the
// bf16 rounding of the rest and takes three bf16 products (16 significant
// bits an operand: within 3 · 2^-16 of Σ|x w|); medium takes one bf16
// product (8 bits: within about 2^-7 of Σ|x w|). Elsewhere both run as
// highest. Process-wide; `--f32-matmul-precision` sets it.
enum class F32Precision { highest, high, medium };
std::string_view f32_precision_name(F32Precision p);
// "highest", "high" or "medium"; nullopt for anything else.
std::optional<F32Precision> parse_f32_precision(std::string_view s);
F32Precision f32_matmul_precision();
void set_f32_matmul_precision(F32Precision p);

// What quantized matmuls run on here, for logs: e.g. "avx512 kernels, int8
// activations (VNNI, AMX prefill)" or "avx2 kernels, f32 activations".
std::string cpu_math_summary();

}  // namespace troupe
