// CUDA graph executables keyed by the op run they replay. A run is captured
// the second time it is seen (the first time every kernel runs eagerly, so
// lazy module loading never happens inside a capture); at most `capacity`
// executables are kept, least recently used evicted.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/ops.hpp"

namespace troupe::cuda {

class GraphCache {
 public:
  explicit GraphCache(int capacity) : capacity_(capacity) {}
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  // The executable recorded for exactly these ops, or null.
  cudaGraphExec_t find(uint64_t hash, const std::vector<Op>& ops);
  // Counts a sighting of a run not in the cache; true once it is worth capturing.
  bool note(uint64_t hash);
  void insert(uint64_t hash, const std::vector<Op>& ops, cudaGraphExec_t exec);
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    uint64_t hash;
    std::vector<Op> ops;
    cudaGraphExec_t exec;
  };
  int capacity_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<uint64_t, int> seen_;
};

// What capture_ops produced: an executable, or why there is none.
struct Capture {
  cudaGraphExec_t exec = nullptr;
  // An op threw while being captured (a bad argument, a device fault): not
  // a capture problem; launching the ops eagerly reports the error itself.
  bool op_failed = false;
  std::string why;  // empty on success
};

// Captures ops on ctx's stream into an executable. Never throws, and leaves
// no (non-sticky) CUDA error pending, so the caller can always fall back to
// launching the ops one by one.
Capture capture_ops(const std::vector<Op>& ops, const DeviceContext& ctx);

}  // namespace troupe::cuda
