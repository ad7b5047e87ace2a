// The generation jobs in flight at the edge, so that a server that shuts
// down can end each one that outlived the grace period cleanly: a final
// event that says why instead of a stream cut in the middle.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace troupe::net {

class GenerationJob;

// Thread-safe; holds weak references only, so a job that ends is released.
class JobRegistry {
 public:
  void add(const std::shared_ptr<GenerationJob>& job);
  // GenerationJob::shutdown on every job still alive; returns how many.
  size_t shutdown_all();
  size_t n_alive();

 private:
  std::mutex mutex_;
  std::vector<std::weak_ptr<GenerationJob>> jobs_;
};

}  // namespace troupe::net
