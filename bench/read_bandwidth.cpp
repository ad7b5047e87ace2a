#include "bench/read_bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "core/thread_pool.hpp"
#include "memory/weight_slabs.hpp"

namespace troupe::bench {
namespace {

constexpr size_t kLineWords = 8;        // 64-byte lines of uint64
constexpr size_t kStreams = 4;
constexpr size_t kAheadWords = 1024 / 8;  // 1 KiB ahead of each stream

// Sums n_lines lines from each of the kStreams streams that start every
// `stride` words from p. Integer sums, so the compiler vectorizes them (a
// float sum's dependency chain would measure the adder, not the memory).
uint64_t sum_streams(const uint64_t* p, size_t stride, size_t n_lines) {
  uint64_t acc[kStreams][kLineWords] = {};
  for (size_t i = 0; i < n_lines * kLineWords; i += kLineWords) {
    for (size_t s = 0; s < kStreams; ++s) {
      const uint64_t* line = p + s * stride + i;
      __builtin_prefetch(line + kAheadWords);
      for (size_t w = 0; w < kLineWords; ++w) acc[s][w] += line[w];
    }
  }
  uint64_t total = 0;
  for (const auto& a : acc) {
    for (uint64_t v : a) total += v;
  }
  return total;
}

}  // namespace

double read_bandwidth_gbs(size_t bytes, int threads) {
  const size_t per_thread_lines = std::max<size_t>(kStreams, bytes / 64 / static_cast<size_t>(threads));
  const size_t stream_lines = per_thread_lines / kStreams;
  const size_t words = stream_lines * kStreams * kLineWords * static_cast<size_t>(threads);
  // In huge pages, as the CPU backend keeps the weights (memory/weight_slabs.hpp):
  // a read over 4 KiB pages is not the best the machine does.
  const std::unique_ptr<uint64_t, decltype(&std::free)> mem(
      static_cast<uint64_t*>(huge_page_memory(words * sizeof(uint64_t))), &std::free);
  const std::span<uint64_t> buf(mem.get(), words);
  for (size_t i = 0; i < words; ++i) buf[i] = i;
  ThreadPool pool(threads);
  std::vector<uint64_t> partial(static_cast<size_t>(threads));
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int ith, int) {
      const uint64_t* slice = buf.data() + static_cast<size_t>(ith) * stream_lines * kStreams * kLineWords;
      partial[static_cast<size_t>(ith)] += sum_streams(slice, stream_lines * kLineWords, stream_lines);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(words * sizeof(uint64_t)) / s / 1e9);
  }
  volatile uint64_t sink = 0;
  for (uint64_t v : partial) sink = sink + v;
  return best;
}

}  // namespace troupe::bench
