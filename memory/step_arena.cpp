// StepArena: bump allocation with 64-byte alignment.
#include "memory/step_arena.hpp"

#include <string>

#include "core/error.hpp"

namespace troupe {

void* StepArena::bytes(size_t n) {
  constexpr size_t kAlign = 64;
  const size_t start = (used_ + kAlign - 1) / kAlign * kAlign;
  if (start + n > capacity_) {
    throw Error(Errc::out_of_memory, "step arena exhausted: need " + std::to_string(start + n) + " bytes, have " +
                                         std::to_string(capacity_));
  }
  used_ = start + n;
  if (used_ > peak_) peak_ = used_;
  return base_ + start;
}

}  // namespace troupe
