// The per-step scratch arena: activations of one forward step are bump-
// allocated from one buffer that is sized once (for the largest step the
// engine will run) and reset at the start of every step, so the hot loop
// never calls the allocator.
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe {

class StepArena {
 public:
  StepArena() = default;
  // Takes a buffer it does not own (backend memory).
  StepArena(void* base, size_t capacity) : base_(static_cast<std::byte*>(base)), capacity_(capacity) {}

  // n floats, 64-byte aligned. Throws Error(out_of_memory) past capacity.
  float* floats(int64_t n) { return static_cast<float*>(bytes(static_cast<size_t>(n) * sizeof(float))); }
  int32_t* ints(int64_t n) { return static_cast<int32_t*>(bytes(static_cast<size_t>(n) * sizeof(int32_t))); }
  void* bytes(size_t n);

  void reset() { used_ = 0; }
  // Releases everything allocated after `mark` (a value of used()).
  void rewind(size_t mark) { used_ = mark < used_ ? mark : used_; }
  size_t used() const { return used_; }
  size_t peak() const { return peak_; }
  size_t capacity() const { return capacity_; }

 private:
  std::byte* base_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;
  size_t peak_ = 0;
};

}  // namespace troupe
