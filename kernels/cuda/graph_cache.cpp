// GraphCache and capture_ops.
#include "kernels/cuda/graph_cache.hpp"

#include <cstring>
#include <exception>
#include <string>

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

Capture capture_ops(const std::vector<Op>& ops, const DeviceContext& ctx) {
  Capture c;
  if (const cudaError_t e = cudaStreamBeginCapture(ctx.stream(), cudaStreamCaptureModeThreadLocal); e != cudaSuccess) {
    (void)cudaGetLastError();
    c.why = std::string("cudaStreamBeginCapture: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    return c;
  }
  // Whatever an op throws (troupe::Error, std::bad_alloc, anything), the
  // capture must still be ended below, or the stream stays in capture mode.
  try {
    for (const Op& op : ops) execute(op, ctx);
  } catch (const std::exception& e) {
    c.op_failed = true;
    c.why = e.what();
  } catch (...) {
    c.op_failed = true;
    c.why = "an op threw a non-standard exception";
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t end = cudaStreamEndCapture(ctx.stream(), &graph);
  if (!c.op_failed) {
    if (end != cudaSuccess || graph == nullptr) {
      c.why = std::string("cudaStreamEndCapture: ") + cudaGetErrorName(end) + ": " + cudaGetErrorString(end);
    } else if (const cudaError_t e = cudaGraphInstantiate(&c.exec, graph, 0); e != cudaSuccess) {
      c.exec = nullptr;
      c.why = std::string("cudaGraphInstantiate: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    }
  }
  if (graph != nullptr) cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  return c;
}

}  // namespace troupe::cuda
