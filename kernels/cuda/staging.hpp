// Host -> device staging for the small index arrays ops take from the host
// (token ids, positions, sequence tables): a pinned host buffer and its
// device mirror, bump-allocated and reset only once the stream is idle, so a
// queued copy (or a graph replaying one) never reads a rewritten slot.
// Identical blobs of one kind staged since the last reset are shared, so the
// per-layer attention metadata of a step is uploaded once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace troupe::cuda {

enum class StageTag : int { ids, positions, rope_freqs, seqs, rows, hidden };

class Staging {
 public:
  explicit Staging(size_t bytes);
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  struct Slot {
    void* dev;         // where the data will be once copied
    const void* host;  // its pinned copy
    size_t bytes;
    bool fresh;  // false: shared with an earlier identical blob (already queued)
  };
  // Copies data into the pinned buffer; nullopt when it does not fit before a reset.
  std::optional<Slot> put(StageTag tag, const void* data, size_t bytes);
  // Call only when no queued work reads the buffers (after a stream sync).
  void reset();
  size_t capacity() const { return cap_; }
  // Counts resets: slots handed out before a reset are no longer valid.
  uint64_t epoch() const { return epoch_; }

 private:
  struct Blob {
    StageTag tag;
    size_t offset;
    size_t bytes;
  };
  unsigned char* host_ = nullptr;
  unsigned char* dev_ = nullptr;
  size_t cap_ = 0;
  size_t used_ = 0;
  uint64_t epoch_ = 0;
  std::vector<Blob> blobs_;
};

}  // namespace troupe::cuda
