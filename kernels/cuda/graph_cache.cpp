// GraphCache and capture_ops.
#include "kernels/cuda/graph_cache.hpp"

#include <cstring>

#include "core/error.hpp"

namespace troupe::cuda {
namespace {
constexpr size_t kMaxSeen = 4096;  // forget sightings past this (many one-off prefill shapes)
}  // namespace

GraphCache::~GraphCache() {
  for (Entry& e : entries_) cudaGraphExecDestroy(e.exec);
}

cudaGraphExec_t GraphCache::find(uint64_t hash, const std::vector<Op>& ops) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->hash == hash && it->ops.size() == ops.size() &&
        std::memcmp(it->ops.data(), ops.data(), ops.size() * sizeof(Op)) == 0) {
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front().exec;
    }
  }
  return nullptr;
}

bool GraphCache::note(uint64_t hash) {
  if (capacity_ <= 0) return false;
  if (seen_.size() >= kMaxSeen) seen_.clear();
  return ++seen_[hash] >= 2;
}

void GraphCache::insert(uint64_t hash, const std::vector<Op>& ops, cudaGraphExec_t exec) {
  while (!entries_.empty() && static_cast<int>(entries_.size()) >= capacity_) {
    cudaGraphExecDestroy(entries_.back().exec);
    entries_.pop_back();
  }
  entries_.push_front({hash, ops, exec});
  seen_.erase(hash);
}

cudaGraphExec_t capture_ops(const std::vector<Op>& ops, const DeviceContext& ctx) {
  if (cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  bool ok = true;
  try {
    for (const Op& op : ops) execute(op, ctx);
  } catch (const Error&) {
    ok = false;  // the capture is invalid; end it below and launch eagerly
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(ctx.stream(), &graph);
  cudaGraphExec_t exec = nullptr;
  if (ok && end == cudaSuccess && graph != nullptr) {
    if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) exec = nullptr;
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  return exec;
}

}  // namespace troupe::cuda
