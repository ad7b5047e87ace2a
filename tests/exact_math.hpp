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

}  // namespace troupe::test
