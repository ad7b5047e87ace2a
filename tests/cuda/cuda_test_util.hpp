// Test helpers for the CUDA backend: skipping (with the reason) where no GPU
// is usable, device buffers owned through the backend, seeded fills, and
// the CPU kernels as reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/cuda_backend.hpp"

// Skips the current test, saying why (e.g. "cudaGetDeviceCount failed with
// error 35 (cudaErrorInsufficientDriver ...)"), where no GPU can be used.
#define TROUPE_REQUIRE_GPU()                                          \
  do {                                                                \
    std::string troupe_why_;                                          \
    if (!::troupe::cuda_available(&troupe_why_)) GTEST_SKIP() << troupe_why_; \
  } while (0)

namespace troupe::test {

// Small buffers and workspace: tests run many backends one after another.
inline CudaBackendOptions small_options(bool graphs = false) {
  return {.device = 0,
          .f32_weights = WeightPrecision::bf16,
          .cuda_graphs = graphs,
          .prefill_attention = PrefillAttention::scalar,  // fp32 bounds; not TROUPE_CUDA_PREFILL_ATTENTION
          .gemv_staging = GemvStaging::off,  // not TROUPE_CUDA_GEMV_STAGING
          .max_graphs = 8,
          .workspace_bytes = size_t{64} << 20,
          .staging_bytes = size_t{4} << 20,
          .weight_chunk_bytes = size_t{16} << 20};
}

// n floats of device memory, freed with the buffer.
class DeviceFloats {
 public:
  DeviceFloats(Backend& b, size_t n) : b_(b), n_(n), p_(static_cast<float*>(b.allocate(n * sizeof(float)))) {}
  DeviceFloats(Backend& b, const std::vector<float>& host) : DeviceFloats(b, host.size()) { put(host); }
  ~DeviceFloats() { b_.deallocate(p_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  float* get() const { return p_; }
  void put(const std::vector<float>& host) { b_.copy_from_host(p_, host.data(), host.size() * sizeof(float)); }
  std::vector<float> read() const {
    std::vector<float> out(n_);
    b_.copy_to_host(out.data(), p_, n_ * sizeof(float));
    return out;
  }

 private:
  Backend& b_;
  size_t n_;
  float* p_;
};

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Largest |got - want| / (abs_tol + rel_tol * |want|); <= 1 passes. NaN fails;
// with zero tolerances only exact equality passes.
inline double worst_ratio(const std::vector<float>& got, const std::vector<float>& want, double abs_tol,
                          double rel_tol) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    if (std::isnan(err)) return INFINITY;
    if (err == 0) continue;  // also what an exact comparison (zero tolerances) accepts
    worst = std::max(worst, err / (abs_tol + rel_tol * std::abs(static_cast<double>(want[i]))));
  }
  return worst;
}

// The recurrent layers' two rounds over state slots: three sequences from
// position 0 (slot 2 prefills 9 tokens, slot 0 a short prompt, slot 3 one
// token), then each continued from its slot. The layers keep no pages; the
// plan copies `table` all the same. Each round's sequences, and its tokens.
struct SlotRound {
  std::vector<AttnSeq> seqs;
  int32_t n_tokens = 0;
};
inline std::vector<SlotRound> slot_rounds(const int32_t* table) {
  struct Spec {
    int32_t n_past, n_q, slot;
  };
  const std::vector<Spec> rounds[] = {{{0, 9, 2}, {0, 3, 0}, {0, 1, 3}}, {{9, 5, 2}, {3, 1, 0}, {1, 1, 3}}};
  std::vector<SlotRound> out;
  for (const auto& specs : rounds) {
    SlotRound& r = out.emplace_back();
    for (const Spec& s : specs) {
      r.seqs.push_back(
          {.q_begin = r.n_tokens, .n_q = s.n_q, .n_past = s.n_past, .block_table = table, .state_slot = s.slot});
      r.n_tokens += s.n_q;
    }
  }
  return out;
}

}  // namespace troupe::test
