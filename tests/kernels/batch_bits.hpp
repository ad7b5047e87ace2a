// The batch rule of the packed f32 and 16-bit matmuls, checked the same way
// for both: decode (below 16 tokens, and every batch under batch-invariant
// math) and the prefill tiles each give a token the same bits in any batch
// and on any number of threads, but not each other's.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/thread_pool.hpp"
#include "tests/exact_math.hpp"

namespace troupe::test {

// matmul(y, x, n_tokens, pool) computes y [n_tokens, n_out] from the first
// n_tokens rows of x [n_max, n_in]. Each batch of 2-40 tokens on 1-3
// threads gets, token by token, the bits of each token run alone, or from
// 16 tokens up under ordinary math the bits of one batch of n_max.
template <class Matmul>
void expect_token_bits_by_batch(Matmul matmul, const std::vector<float>& x, int64_t n_in, int64_t n_out,
                                int64_t n_max, const std::string& what) {
  ThreadPool pool1(1), pool2(2), pool3(3);
  auto run = [&](int64_t n_tokens, ThreadPool& pool) {
    std::vector<float> y(static_cast<size_t>(n_tokens * n_out));
    matmul(y.data(), x.data(), n_tokens, pool);
    return y;
  };
  std::vector<float> alone(static_cast<size_t>(n_max * n_out));
  for (int64_t tok = 0; tok < n_max; ++tok) matmul(alone.data() + tok * n_out, x.data() + tok * n_in, 1, pool1);
  for (bool invariant : {false, true}) {
    const BatchInvariantMath mode(invariant);
    const std::vector<float> big = run(n_max, pool1);
    for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
      for (int64_t n_tokens : {2, 3, 5, 15, 16, 23, 40}) {
        const std::vector<float> y = run(n_tokens, *pool);
        const std::vector<float>& want = !invariant && n_tokens >= 16 ? big : alone;
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_EQ(y[i], want[i]) << what << (invariant ? " batch-invariant" : "") << " threads " << pool->size()
                                   << " n_tokens " << n_tokens << " token " << i / n_out << " row " << i % n_out;
        }
      }
    }
  }
}

}  // namespace troupe::test
