#include "memory/weight_slabs.hpp"

#include <cstdlib>
#include <iterator>
#include <new>
#include <string>

#include "core/error.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace troupe {

void* huge_page_memory(size_t bytes) {
  const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = std::aligned_alloc(kHugePageBytes, rounded == 0 ? kHugePageBytes : rounded);
  if (p == nullptr) throw std::bad_alloc();
#if defined(__linux__)
  (void)madvise(p, rounded, MADV_HUGEPAGE);  // advice only
#endif
  return p;
}

WeightSlabs::~WeightSlabs() {
  for (auto& [base, slab] : slabs_) std::free(reinterpret_cast<void*>(base));
}

void* WeightSlabs::allocate(size_t bytes) {
  if (bytes == 0 || bytes >= kMaxPiece) {
    throw Error(Errc::invalid_argument,
                "weight slabs: a piece of " + std::to_string(bytes) + " bytes (they take 1 to 16 MiB - 1)");
  }
  const size_t size = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  std::lock_guard lock(mu_);
  auto it = slabs_.find(open_);
  if (it == slabs_.end() || it->second.used + size > kSlabBytes) {
    const auto base = reinterpret_cast<uintptr_t>(huge_page_memory(kSlabBytes));
    it = slabs_.emplace(base, Slab{}).first;
    open_ = base;
  }
  void* p = reinterpret_cast<void*>(it->first + it->second.used);
  it->second.used += size;
  ++it->second.live;
  return p;
}

bool WeightSlabs::release(void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard lock(mu_);
  auto it = slabs_.upper_bound(a);  // the first slab above p
  if (it == slabs_.begin()) return false;
  it = std::prev(it);
  if (a >= it->first + it->second.used) return false;  // not a piece (or past the cut ones)
  if (--it->second.live == 0) {
    std::free(reinterpret_cast<void*>(it->first));
    if (open_ == it->first) open_ = 0;
    slabs_.erase(it);
  }
  return true;
}

size_t WeightSlabs::slab_count() const {
  std::lock_guard lock(mu_);
  return slabs_.size();
}

}  // namespace troupe
