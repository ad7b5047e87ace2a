// JobRegistry: weak references pruned on each add, shut down in one sweep.
#include "net/job_registry.hpp"

#include "net/generation.hpp"

namespace troupe::net {

void JobRegistry::add(const std::shared_ptr<GenerationJob>& job) {
  std::lock_guard lock(mutex_);
  std::erase_if(jobs_, [](const std::weak_ptr<GenerationJob>& w) { return w.expired(); });
  jobs_.push_back(job);
}

size_t JobRegistry::shutdown_all() {
  std::vector<std::shared_ptr<GenerationJob>> alive;
  {
    std::lock_guard lock(mutex_);
    for (const auto& w : jobs_) {
      if (auto j = w.lock()) alive.push_back(std::move(j));
    }
    jobs_.clear();
  }
  // Outside the lock: a job's final events may add nothing here, but they
  // run listener code that should not wait on this mutex.
  for (const auto& j : alive) j->shutdown();
  return alive.size();
}

size_t JobRegistry::n_alive() {
  std::lock_guard lock(mutex_);
  std::erase_if(jobs_, [](const std::weak_ptr<GenerationJob>& w) { return w.expired(); });
  return jobs_.size();
}

}  // namespace troupe::net
