// The span ring (see trace_ring.hpp).
#include "telemetry/trace_ring.hpp"

#include <algorithm>
#include <chrono>

#include "core/error.hpp"

namespace troupe {

TraceTrack::TraceTrack(std::string name, size_t capacity)
    : name_(std::move(name)), slots_(std::max<size_t>(capacity, 1)), ids_(slots_.size() * kIdsPerSpan) {}

void TraceTrack::record(const SpanTags& tags, int64_t enqueue_ns, int64_t start_ns, int64_t end_ns) {
  std::lock_guard lock(mu_);
  // A message naming more requests than the id ring holds keeps its first ones.
  const size_t n_ids = std::min(tags.requests.size(), ids_.size());
  const uint64_t at = n_ids_;
  for (size_t i = 0; i < n_ids; ++i) ids_[(at + i) % ids_.size()] = tags.requests[i];
  n_ids_ += n_ids;
  slots_[n_spans_ % slots_.size()] = Slot{.message = tags.message,
                                          .enqueue_ns = enqueue_ns,
                                          .start_ns = start_ns,
                                          .end_ns = end_ns,
                                          .step = tags.step,
                                          .engine = tags.engine,
                                          .n_ids = static_cast<uint32_t>(n_ids),
                                          .ids_at = at};
  ++n_spans_;
}

std::vector<Span> TraceTrack::snapshot() const {
  std::lock_guard lock(mu_);
  const uint64_t n_kept = std::min<uint64_t>(n_spans_, slots_.size());
  // Ids older than this have been overwritten by later spans' ids.
  const uint64_t oldest_id = n_ids_ > ids_.size() ? n_ids_ - ids_.size() : 0;
  std::vector<Span> out;
  out.reserve(n_kept);
  for (uint64_t k = n_spans_ - n_kept; k < n_spans_; ++k) {
    const Slot& s = slots_[k % slots_.size()];
    Span span{.message = s.message,
              .enqueue_ns = s.enqueue_ns,
              .start_ns = s.start_ns,
              .end_ns = s.end_ns,
              .step = s.step,
              .engine = s.engine};
    for (uint64_t i = std::max(s.ids_at, oldest_id); i < s.ids_at + s.n_ids; ++i) {
      span.requests.push_back(ids_[i % ids_.size()]);
    }
    out.push_back(std::move(span));
  }
  return out;
}

uint64_t TraceTrack::recorded() const {
  std::lock_guard lock(mu_);
  return n_spans_;
}

Tracer::Tracer(size_t capacity_per_track)
    : capacity_(capacity_per_track),
      origin_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                     std::chrono::steady_clock::now().time_since_epoch())
                     .count()) {
  if (capacity_per_track == 0) throw Error(Errc::invalid_argument, "trace capacity must be at least 1 span");
}

std::shared_ptr<TraceTrack> Tracer::add_track(std::string name) {
  auto t = std::make_shared<TraceTrack>(std::move(name), capacity_);
  std::lock_guard lock(mu_);
  tracks_.push_back(t);
  return t;
}

std::vector<std::shared_ptr<TraceTrack>> Tracer::tracks() const {
  std::lock_guard lock(mu_);
  return tracks_;
}

}  // namespace troupe
