// The process-wide CPU math switches (core/cpu_features.hpp), each set for
// one scope and put back to its default at the end of it.
//
// Exact math: matmuls over quantized, f16 and bf16 weights keep f32
// activations. Tests that compare the forward pass with an outside reference
// to float rounding (Hugging Face, gguf-py/numpy) or that measure another
// error in isolation (a KV cache type) hold one, so that the int8 or bf16
// path's rounding is not mistaken for theirs; those paths have tests of
// their own.
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

// Batch-invariant math: tests that compare a sequence's output alone with the
// same sequence batched or speculated hold one, since the AMX bf16 prefill
// rounds differently from decode.
class BatchInvariantMath {
 public:
  explicit BatchInvariantMath(bool on = true) { set_batch_invariant(on); }
  ~BatchInvariantMath() { set_batch_invariant(false); }
  BatchInvariantMath(const BatchInvariantMath&) = delete;
  BatchInvariantMath& operator=(const BatchInvariantMath&) = delete;
};

// AMX on or off (where the CPU has it), for tests that compare the paths.
class AmxSwitch {
 public:
  explicit AmxSwitch(bool on) { set_amx_enabled(on); }
  ~AmxSwitch() { set_amx_enabled(true); }
  AmxSwitch(const AmxSwitch&) = delete;
  AmxSwitch& operator=(const AmxSwitch&) = delete;
};

// The f32 matmul precision (highest, high or medium), for tests of the
// reduced ones.
class F32MatmulPrecision {
 public:
  explicit F32MatmulPrecision(F32Precision p) { set_f32_matmul_precision(p); }
  ~F32MatmulPrecision() { set_f32_matmul_precision(F32Precision::highest); }
  F32MatmulPrecision(const F32MatmulPrecision&) = delete;
  F32MatmulPrecision& operator=(const F32MatmulPrecision&) = delete;
};

}  // namespace troupe::test
