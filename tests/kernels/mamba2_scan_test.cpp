// Mamba-2's scan (kernels/cpu/mamba2_scan.cpp) against a plain
// double-precision run of the recurrence as transformers writes its decode
// step (mamba2_selective_state_update, after causal_conv1d_fn, then the
// grouped gated RMSNorm): whole sequences, prompts fed in chunks through a
// state slot (the same bits as one call), several sequences in one call
// with a slot another sequence left behind, and bad slots.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu_kernels.hpp"
#include "tests/kernels/random_rows.hpp"

namespace troupe {
namespace {

// 4 heads of 6, a state of 5, B and C in 2 groups, 4 taps.
constexpr kernels::Mamba2Shape kMamba2Shape{.n_heads = 4, .head_dim = 6, .d_state = 5, .n_groups = 2, .taps = 4};

using test::max_abs_diff;

struct Mamba2Layer {
  std::vector<float> conv, conv_bias, a, dt_bias, d, norm;
  explicit Mamba2Layer(uint32_t seed) {
    const kernels::Mamba2Shape& g = kMamba2Shape;
    conv = test::normal_floats(static_cast<size_t>(g.conv_dim() * g.taps), seed, 0.5f);
    conv_bias = test::normal_floats(static_cast<size_t>(g.conv_dim()), seed + 1, 0.2f);
    a = test::normal_floats(static_cast<size_t>(g.n_heads), seed + 2);
    for (float& x : a) x = -std::exp(x);  // -exp(A_log)
    dt_bias = test::normal_floats(static_cast<size_t>(g.n_heads), seed + 3);
    d = test::normal_floats(static_cast<size_t>(g.n_heads), seed + 4);
    norm = test::normal_floats(static_cast<size_t>(g.inner()), seed + 5, 0.3f);
    for (float& x : norm) x += 1.0f;
  }
  kernels::Mamba2Weights weights() const {
    return {.conv = conv.data(), .conv_bias = conv_bias.data(), .a = a.data(), .dt_bias = dt_bias.data(),
            .d = d.data(), .norm = norm.data(), .norm_eps = 1e-5f};
  }
};

// y [n, inner] from zero state, in doubles; proj [n, proj_width].
std::vector<float> reference(const Mamba2Layer& L, const std::vector<float>& proj, int64_t n) {
  const kernels::Mamba2Shape& g = kMamba2Shape;
  const int64_t inner = g.inner(), C = g.conv_dim(), W = g.proj_width(), N = g.d_state;
  std::vector<double> xbc(static_cast<size_t>(n * C));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      double acc = L.conv_bias[static_cast<size_t>(c)];
      for (int64_t k = 0; k < g.taps; ++k) {
        const int64_t p = t - (g.taps - 1) + k;
        if (p < 0) continue;
        const double w = L.conv[static_cast<size_t>(c * g.taps + k)];
        acc += w * proj[static_cast<size_t>(p * W + inner + c)];
      }
      xbc[static_cast<size_t>(t * C + c)] = acc / (1.0 + std::exp(-acc));
    }
  }
  std::vector<double> y(static_cast<size_t>(n * inner));
  for (int64_t h = 0; h < g.n_heads; ++h) {
    const int64_t grp = h / (g.n_heads / g.n_groups);
    std::vector<double> H(static_cast<size_t>(g.head_dim * N), 0.0);
    for (int64_t t = 0; t < n; ++t) {
      const double* r = xbc.data() + t * C;
      const double raw = proj[static_cast<size_t>(t * W + inner + C + h)] + static_cast<double>(L.dt_bias[h]);
      const double dt = std::log1p(std::exp(raw));
      const double decay = std::exp(dt * L.a[static_cast<size_t>(h)]);
      for (int64_t p = 0; p < g.head_dim; ++p) {
        const double x = r[h * g.head_dim + p];
        double out = 0.0;
        for (int64_t s = 0; s < N; ++s) {
          double& hs = H[static_cast<size_t>(p * N + s)];
          hs = hs * decay + dt * x * r[inner + grp * N + s];
          out += hs * r[inner + g.n_groups * N + grp * N + s];
        }
        y[static_cast<size_t>(t * inner + h * g.head_dim + p)] = out + L.d[static_cast<size_t>(h)] * x;
      }
    }
  }
  std::vector<float> out(y.size());
  const int64_t gs = inner / g.n_groups;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t q = 0; q < g.n_groups; ++q) {
      std::vector<double> v(static_cast<size_t>(gs));
      double ss = 0.0;
      for (int64_t k = 0; k < gs; ++k) {
        const int64_t col = q * gs + k;
        const double z = proj[static_cast<size_t>(t * W + col)];
        v[static_cast<size_t>(k)] = y[static_cast<size_t>(t * inner + col)] * z / (1.0 + std::exp(-z));
        ss += v[static_cast<size_t>(k)] * v[static_cast<size_t>(k)];
      }
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(gs) + 1e-5);
      for (int64_t k = 0; k < gs; ++k) {
        out[static_cast<size_t>(t * inner + q * gs + k)] =
            static_cast<float>(v[static_cast<size_t>(k)] * inv * L.norm[static_cast<size_t>(q * gs + k)]);
      }
    }
  }
  return out;
}

struct Mamba2Slots {
  std::vector<float> data;
  PagedKvView view;
  explicit Mamba2Slots(int64_t n_slots) {
    data.assign(static_cast<size_t>(n_slots * kMamba2Shape.state_floats()), 7.0f);  // garbage, as a reused slot holds
    view.state = data.data();
    view.n_state_slots = n_slots;
    view.state_floats = kMamba2Shape.state_floats();
  }
};

// Tokens [begin, end) of proj as one call for one sequence.
std::vector<float> run_chunk(const Mamba2Layer& L, const std::vector<float>& proj, int64_t begin, int64_t end,
                             Mamba2Slots& slots, int32_t slot, ThreadPool& pool) {
  const int64_t W = kMamba2Shape.proj_width();
  std::vector<float> p(proj.begin() + begin * W, proj.begin() + end * W);
  std::vector<float> y(static_cast<size_t>((end - begin) * kMamba2Shape.inner()));
  const AttnSeq s{.q_begin = 0, .n_q = static_cast<int32_t>(end - begin), .n_past = static_cast<int32_t>(begin),
                  .state_slot = slot};
  kernels::mamba2_scan(y.data(), p.data(), slots.view, &s, 1, L.weights(), kMamba2Shape, pool);
  return y;
}

TEST(Mamba2Scan, WholeSequenceMatchesTheRecurrence) {
  ThreadPool pool(2);
  const Mamba2Layer L(3);
  const int64_t n = 11;
  const auto proj = test::normal_floats(static_cast<size_t>(n * kMamba2Shape.proj_width()), 9);
  Mamba2Slots slots(2);
  EXPECT_LT(max_abs_diff(run_chunk(L, proj, 0, n, slots, 1, pool), reference(L, proj, n)), 2e-5f);
}

TEST(Mamba2Scan, ChunksGiveTheBitsOfOneCall) {
  ThreadPool pool(2);
  const Mamba2Layer L(4);
  const int64_t n = 13;
  const auto proj = test::normal_floats(static_cast<size_t>(n * kMamba2Shape.proj_width()), 10);
  Mamba2Slots whole_slots(1);
  const std::vector<float> whole = run_chunk(L, proj, 0, n, whole_slots, 0, pool);
  for (const int64_t chunk : {1, 2, 5}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    Mamba2Slots slots(3);
    std::vector<float> got;
    for (int64_t t = 0; t < n; t += chunk) {
      const std::vector<float> part = run_chunk(L, proj, t, std::min(n, t + chunk), slots, 2, pool);
      got.insert(got.end(), part.begin(), part.end());
    }
    EXPECT_EQ(got, whole);
  }
}

TEST(Mamba2Scan, SequencesInOneCallAreIndependent) {
  ThreadPool pool(2);
  const Mamba2Layer L(5);
  const int64_t W = kMamba2Shape.proj_width();
  const std::vector<int64_t> lens{7, 3, 1};
  std::vector<std::vector<float>> projs;
  for (size_t i = 0; i < lens.size(); ++i) projs.push_back(test::normal_floats(static_cast<size_t>(lens[i] * W), 20 + i));
  Mamba2Slots slots(3);
  const auto other = test::normal_floats(static_cast<size_t>(4 * W), 30);
  run_chunk(L, other, 0, 4, slots, 0, pool);  // slot 0 holds another sequence's state
  std::vector<float> proj;
  std::vector<AttnSeq> seqs;
  int32_t row = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    proj.insert(proj.end(), projs[i].begin(), projs[i].end());
    seqs.push_back({.q_begin = row, .n_q = static_cast<int32_t>(lens[i]), .n_past = 0,
                    .state_slot = static_cast<int32_t>(i)});
    row += static_cast<int32_t>(lens[i]);
  }
  std::vector<float> y(static_cast<size_t>(row * kMamba2Shape.inner()));
  kernels::mamba2_scan(y.data(), proj.data(), slots.view, seqs.data(), 3, L.weights(), kMamba2Shape, pool);
  size_t at = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    Mamba2Slots alone(1);
    const std::vector<float> want = run_chunk(L, projs[i], 0, lens[i], alone, 0, pool);
    const auto begin = y.begin() + static_cast<long>(at);
    EXPECT_EQ(std::vector<float>(begin, begin + static_cast<long>(want.size())), want);
    at += want.size();
  }
}

TEST(Mamba2Scan, BadSlotsAreRefused) {
  ThreadPool pool(1);
  const Mamba2Layer L(6);
  const auto proj = test::normal_floats(static_cast<size_t>(2 * kMamba2Shape.proj_width()), 40);
  Mamba2Slots slots(2);
  EXPECT_THROW(run_chunk(L, proj, 0, 2, slots, 2, pool), Error);
  EXPECT_THROW(run_chunk(L, proj, 0, 2, slots, -1, pool), Error);
  slots.view.state_floats -= 1;
  EXPECT_THROW(run_chunk(L, proj, 0, 2, slots, 0, pool), Error);
}

}  // namespace
}  // namespace troupe
