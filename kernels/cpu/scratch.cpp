// Per-thread scratch of the CPU matmul paths (scratch.hpp).
#include "kernels/cpu/scratch.hpp"

#include <new>

namespace troupe::kernels::detail {
namespace {

constexpr int kSlots = static_cast<int>(Scratch::conv_window) + 1;

// Grow-only 64-byte-aligned storage of one thread.
struct Arena {
  uint8_t* data = nullptr;
  size_t capacity = 0;
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() { ::operator delete(data, std::align_val_t{64}); }
};

}  // namespace

uint8_t* scratch(Scratch slot, size_t bytes) {
  thread_local Arena arenas[kSlots];
  Arena& a = arenas[static_cast<int>(slot)];
  if (bytes > a.capacity) {
    ::operator delete(a.data, std::align_val_t{64});
    a.data = nullptr;
    a.capacity = 0;
    a.data = static_cast<uint8_t*>(::operator new(bytes, std::align_val_t{64}));
    a.capacity = bytes;
  }
  return a.data;
}

}  // namespace troupe::kernels::detail
