// Per-actor timelines: each traced actor owns a TraceTrack, a bounded ring
// of spans (one per message it handled: when the message was put in its
// mailbox, when the actor took it out, when its handler returned with
// everything it sends sent), tagged with the step and the request ids the
// message carried. Fixed memory, the oldest spans overwritten, one writer
// (the actor's own thread) and readers that copy under a short lock, so
// tracing can stay on during experiments.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace troupe {

inline constexpr uint64_t kNoStep = ~uint64_t{0};

// What one message said, read before its handler runs.
struct SpanTags {
  const char* message = "message";  // a string literal: the message type
  uint64_t step = kNoStep;          // the step id within its engine, for step messages
  int32_t engine = -1;
  std::span<const int64_t> requests;  // the request ids it concerns
};

struct Span {
  const char* message = "message";
  int64_t enqueue_ns = 0;  // steady clock; 0: not known
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t step = kNoStep;
  int32_t engine = -1;
  std::vector<int64_t> requests;  // may be cut short when the id ring wrapped
};

class TraceTrack {
 public:
  // `capacity`: spans kept; request ids get kIdsPerSpan times as many slots.
  TraceTrack(std::string name, size_t capacity);

  const std::string& name() const { return name_; }

  void record(const SpanTags& tags, int64_t enqueue_ns, int64_t start_ns, int64_t end_ns);

  // The spans still in the ring, oldest first.
  std::vector<Span> snapshot() const;
  uint64_t recorded() const;  // since start, overwritten ones included
  size_t capacity() const { return slots_.size(); }

  static constexpr size_t kIdsPerSpan = 8;

 private:
  struct Slot {
    const char* message;
    int64_t enqueue_ns, start_ns, end_ns;
    uint64_t step;
    int32_t engine;
    uint32_t n_ids;
    uint64_t ids_at;  // absolute position in the id stream
  };

  const std::string name_;
  mutable std::mutex mu_;  // uncontended but for snapshots
  std::vector<Slot> slots_;
  std::vector<int64_t> ids_;
  uint64_t n_spans_ = 0;  // absolute count; slot = n % capacity
  uint64_t n_ids_ = 0;
};

// The tracks of one pipeline, and the clock origin of its trace.
class Tracer {
 public:
  explicit Tracer(size_t capacity_per_track);
  std::shared_ptr<TraceTrack> add_track(std::string name);
  std::vector<std::shared_ptr<TraceTrack>> tracks() const;
  int64_t origin_ns() const { return origin_ns_; }
  size_t capacity_per_track() const { return capacity_; }

 private:
  const size_t capacity_;
  const int64_t origin_ns_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<TraceTrack>> tracks_;
};

}  // namespace troupe
