// The shared CPU math options of the `troupe` commands.
#include "tools/cli/cpu_options.hpp"

#include <CLI/CLI.hpp>

#include "core/cpu_features.hpp"
#include "core/thread_pool.hpp"

namespace troupe::cli {

void add_cpu_options(CLI::App* cmd, CpuArgs* a) {
  cmd->add_flag("--exact-math", a->exact_math,
                "Keep f32 activations for quantized, f16 and bf16 weights (no int8 or bf16 dot products): "
                "slower, matches the dequantized weights to float rounding");
  cmd->add_flag("--batch-invariant", a->batch_invariant,
                "Keep a token's results independent of how many tokens share its step (no AMX bf16 prefill): "
                "slower prefill where the CPU has AMX; greedy output no batching or speculation changes");
  cmd->add_option("--f32-matmul-precision", a->f32_precision,
                  "How a prefill over f32 weights may round, where the CPU has AMX (as PyTorch's "
                  "set_float32_matmul_precision): highest (f32 products, the default), high (three bf16 products of "
                  "split operands, 16 significant bits), medium (one bf16 product, 8 bits)")
      ->check(CLI::IsMember({"highest", "high", "medium"}));
  cmd->add_option("--cpu-affinity", a->cpu_affinity,
                  "Pin kernel threads to these CPUs (e.g. 0,1 or 0-3), stage by stage in order");
}

void apply_cpu_options(const CpuArgs& a) {
  set_exact_math(a.exact_math);
  set_batch_invariant(a.batch_invariant);
  set_f32_matmul_precision(parse_f32_precision(a.f32_precision).value_or(F32Precision::highest));
  if (!a.cpu_affinity.empty()) set_cpu_affinity(parse_cpu_list(a.cpu_affinity));
}

}  // namespace troupe::cli
