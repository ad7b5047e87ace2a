// The CPU math options every `troupe` command that runs a model takes:
// `--exact-math` (f32 activations, no int8 or bf16 path),
// `--batch-invariant` (no math whose bits depend on the batch),
// `--f32-matmul-precision` (f32 weights' prefill on AMX bf16 products, as
// PyTorch's torch.set_float32_matmul_precision names the levels) and
// `--cpu-affinity LIST` (pin kernel threads, stage by stage; core/thread_pool).
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace troupe::cli {

struct CpuArgs {
  bool exact_math = false;
  bool batch_invariant = false;
  std::string f32_precision = "highest";
  std::string cpu_affinity;
};

void add_cpu_options(CLI::App* cmd, CpuArgs* a);
// Applies them to the process; call before any backend is made.
void apply_cpu_options(const CpuArgs& a);

}  // namespace troupe::cli
