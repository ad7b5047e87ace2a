// The KV-type rule per backend. The CPU tiles take any head_dim (short q8_0
// groups included); the CUDA kernels give each lane the dims lane + 32 i, so
// their q8_0 path needs whole groups of 32 (one scale per i).
#include "kernels/kv_support.hpp"

namespace troupe {

std::string kv_type_refusal(std::string_view backend, KvType type, int64_t head_dim) {
  if (backend == "cuda" && type == KvType::q8_0 && head_dim % kKvQ8Group != 0) {
    return "the cuda backend cannot hold a q8_0 KV cache for this model's head_dim " + std::to_string(head_dim) +
           " (its q8_0 attention needs a multiple of 32; use --kv-type f16 or bf16)";
  }
  return {};
}

}  // namespace troupe
