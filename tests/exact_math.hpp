// Exact math for one scope: matmuls over quantized, f16 and bf16 weights
// keep f32 activations (core/cpu_features.hpp). Tests that compare the
// forward pass with an outside reference to float rounding (Hugging Face,
// gguf-py/numpy) or that measure another error in isolation (a KV cache type)
// hold one, so that the int8 or bf16 path's rounding is not mistaken for
// theirs; those paths have tests of their own.
#pragma once

#include "core/cpu_features.hpp"

namespace troupe::test {

class ExactMath {
 public:
  ExactMath() { set_exact_math(true); }
  ~ExactMath() { set_exact_math(false); }
  ExactMath(const ExactMath&) = delete;
  ExactMath& operator=(const ExactMath&) = delete;
};

// Batch-invariant math for one scope (core/cpu_features.hpp): tests that
// compare a sequence's output alone with the same sequence batched or
// speculated hold one, since the AMX bf16 prefill rounds differently from
// decode.
class BatchInvariantMath {
 public:
  BatchInvariantMath() { set_batch_invariant(true); }
  ~BatchInvariantMath() { set_batch_invariant(false); }
  BatchInvariantMath(const BatchInvariantMath&) = delete;
  BatchInvariantMath& operator=(const BatchInvariantMath&) = delete;
};

}  // namespace troupe::test
