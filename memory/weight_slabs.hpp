// Host memory for weights that decode streams every token, in transparent
// huge pages. A matrix in 4 KiB pages costs a GEMV over DRAM a TLB miss
// every 4 KiB and its hardware prefetch at each page's end: 110M int8 GEMV
// on a Zen 4 core, the same matrices in 4 KiB pages and in a huge-page slab,
// passes alternated in one process, huge pages faster by 9-21% with 1
// thread and 6-9% with 2 (docs/performance.md). Every matrix of a 110M
// model is under 2 MiB, so one huge page each would waste most of it; and a
// 3 MB one rounded up to 4 MiB wastes a quarter. So matrices are cut one
// after another from slabs, and only each slab's last huge page is part
// used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace troupe {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// bytes rounded up to whole 2 MiB pages, 2 MiB aligned, advised as
// transparent huge pages (advice only: where the kernel does not grant
// them, 4 KiB pages work too). Freed with std::free. Throws std::bad_alloc.
void* huge_page_memory(size_t bytes);

// Pieces of under kMaxPiece bytes cut one after another from slabs of
// huge_page_memory, in the order asked for (a model's matrices in the order
// its layers read them). A piece that does not fit in the open slab's rest
// opens a new slab; the rest stays address space only (a huge page is
// granted when first touched). A slab is freed when every piece of it is
// released, and all of them with the WeightSlabs. Thread-safe.
class WeightSlabs {
 public:
  static constexpr size_t kSlabBytes = size_t{32} << 20;
  static constexpr size_t kMaxPiece = kSlabBytes / 2;  // larger ones: huge_page_memory of their own
  static constexpr size_t kAlignment = 64;

  WeightSlabs() = default;
  ~WeightSlabs();
  WeightSlabs(const WeightSlabs&) = delete;
  WeightSlabs& operator=(const WeightSlabs&) = delete;

  // bytes (1 to kMaxPiece - 1), kAlignment aligned. Throws
  // Error(invalid_argument) outside that range, std::bad_alloc.
  void* allocate(size_t bytes);
  // Whether p is a piece of allocate's (then it is released); false leaves
  // p to its owner's other allocator.
  bool release(void* p);

  size_t slab_count() const;

 private:
  struct Slab {
    size_t used = 0;  // bytes cut from the start
    int64_t live = 0;  // pieces not released
  };
  mutable std::mutex mu_;
  std::map<uintptr_t, Slab> slabs_;  // by base address
  uintptr_t open_ = 0;               // the slab pieces are cut from; 0: none
};

}  // namespace troupe
