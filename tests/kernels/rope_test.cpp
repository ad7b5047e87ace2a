// RoPE against references written from each convention's definition: the
// GGUF/llama.cpp adjacent-pair rotation and Hugging Face's rotate_half form
// (x * cos + rotate_half(x) * sin). Angles in double; tolerance 1e-5 absolute
// on values in [-1, 1], including positions up to 131071.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "isa_paths.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe {
namespace {

using kernels::RopeLayout;
using kernels::RopeParams;

constexpr double kRopeTol = 1e-5;

double angle(int32_t pos, int64_t i, int64_t n_rot, const RopeParams& p) {
  const double ff = p.freq_factors ? p.freq_factors[i] : 1.0;
  return double(pos) * p.freq_scale / (std::pow(double(p.theta), 2.0 * double(i) / double(n_rot)) * ff);
}

// llama.cpp "normal": (x[2i], x[2i+1]) turned by angle i.
std::vector<double> ref_normal(const std::vector<float>& x, const std::vector<int32_t>& pos, int64_t n_head,
                               int64_t head_dim, int64_t n_rot, const RopeParams& p) {
  std::vector<double> y(x.begin(), x.end());
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int64_t h = 0; h < n_head; ++h) {
      const size_t base = (t * n_head + h) * head_dim;
      for (int64_t i = 0; i < n_rot / 2; ++i) {
        const double a = angle(pos[t], i, n_rot, p);
        const double x0 = x[base + 2 * i], x1 = x[base + 2 * i + 1];
        y[base + 2 * i] = (x0 * std::cos(a) - x1 * std::sin(a)) * p.mscale;
        y[base + 2 * i + 1] = (x0 * std::sin(a) + x1 * std::cos(a)) * p.mscale;
      }
    }
  }
  return y;
}

// Hugging Face: over the first n_rot dims, cos/sin are the half-length tables
// repeated twice, and rotate_half(x) = cat(-x[half:], x[:half]).
std::vector<double> ref_hf(const std::vector<float>& x, const std::vector<int32_t>& pos, int64_t n_head,
                           int64_t head_dim, int64_t n_rot, const RopeParams& p) {
  std::vector<double> y(x.begin(), x.end());
  const int64_t half = n_rot / 2;
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int64_t h = 0; h < n_head; ++h) {
      const size_t base = (t * n_head + h) * head_dim;
      for (int64_t j = 0; j < n_rot; ++j) {
        const double a = angle(pos[t], j % half, n_rot, p);
        const double rot = j < half ? -double(x[base + j + half]) : double(x[base + j - half]);
        y[base + j] = (x[base + j] * std::cos(a) + rot * std::sin(a)) * p.mscale;
      }
    }
  }
  return y;
}

void check_layout(RopeLayout layout, int64_t head_dim, int64_t n_rot_param, float freq_scale, bool factors,
                  float mscale = 1.0f) {
  std::mt19937 rng(static_cast<unsigned>(head_dim * 31 + n_rot_param));
  const int64_t n_head = 3;
  const std::vector<int32_t> pos = {0, 1, 7, 100, 4095, 131071};
  const int64_t n_rot = n_rot_param == 0 ? head_dim : n_rot_param;
  auto ff = test::random_floats(rng, n_rot / 2, 1.0f, 8.0f);
  const RopeParams p{.layout = layout,
                     .n_rot = n_rot_param,
                     .theta = 500000.0f,
                     .freq_scale = freq_scale,
                     .freq_factors = factors ? ff.data() : nullptr,
                     .mscale = mscale};
  auto x = test::random_floats(rng, pos.size() * n_head * head_dim, -1.0f, 1.0f);
  const auto want = layout == RopeLayout::normal ? ref_normal(x, pos, n_head, head_dim, n_rot, p)
                                                 : ref_hf(x, pos, n_head, head_dim, n_rot, p);
  const auto orig = x;
  kernels::rope(x.data(), pos.data(), static_cast<int64_t>(pos.size()), n_head, head_dim, p);
  for (size_t k = 0; k < x.size(); ++k) {
    const int64_t d = static_cast<int64_t>(k) % head_dim;
    if (d >= n_rot) {
      ASSERT_EQ(x[k], orig[k]) << "dims past n_rot must pass through untouched, k=" << k;
    } else {
      ASSERT_NEAR(x[k], want[k], kRopeTol)
          << "layout=" << int(layout) << " head_dim=" << head_dim << " n_rot=" << n_rot << " k=" << k;
    }
  }
  // Position 0 is the identity, up to mscale on the rotated dims.
  for (int64_t k = 0; k < n_head * head_dim; ++k) {
    ASSERT_FLOAT_EQ(x[k], k % head_dim < n_rot ? orig[k] * mscale : orig[k]);
  }
}

TEST(Rope, NormalLayoutMatchesAdjacentPairReference) {
  check_layout(RopeLayout::normal, 64, 0, 1.0f, false);
  check_layout(RopeLayout::normal, 128, 0, 0.25f, true);
  check_layout(RopeLayout::normal, 8, 0, 1.0f, false);
  check_layout(RopeLayout::normal, 64, 32, 1.0f, false);  // partial rotation
}

TEST(Rope, NeoxLayoutMatchesHuggingFaceRotateHalf) {
  check_layout(RopeLayout::neox, 64, 0, 1.0f, false);
  check_layout(RopeLayout::neox, 128, 0, 0.5f, true);
  check_layout(RopeLayout::neox, 10, 0, 1.0f, false);
  check_layout(RopeLayout::neox, 80, 20, 1.0f, true);  // partial rotation (e.g. Phi: 32 of 80)
}

// LongRoPE: per-pair factors and an attention factor on the rotated dims
// only (Phi-4-mini rotates 96 of 128).
TEST(Rope, AttentionFactorScalesOnlyTheRotatedDims) {
  check_layout(RopeLayout::neox, 128, 96, 1.0f, true, 1.19f);
  check_layout(RopeLayout::normal, 64, 0, 1.0f, true, 0.8f);
}

TEST(Rope, KnownSmallCase) {
  // head_dim 4, theta 10000, pos 3: pair 0 turns by 3 rad, pair 1 by 3/100 rad.
  float x[4] = {1, 0, 0, 1};
  const int32_t pos = 3;
  kernels::rope(x, &pos, 1, 1, 4, {.layout = RopeLayout::normal, .theta = 10000.0f});
  EXPECT_NEAR(x[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(3.0), 1e-6);
  EXPECT_NEAR(x[2], -std::sin(0.03), 1e-6);
  EXPECT_NEAR(x[3], std::cos(0.03), 1e-6);
  // neox pairs (0, 2) and (1, 3).
  float y[4] = {1, 0, 0, 1};
  kernels::rope(y, &pos, 1, 1, 4, {.layout = RopeLayout::neox, .theta = 10000.0f});
  EXPECT_NEAR(y[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(y[2], std::sin(3.0), 1e-6);
  EXPECT_NEAR(y[1], -std::sin(0.03), 1e-6);
  EXPECT_NEAR(y[3], std::cos(0.03), 1e-6);
}

// The kernel keeps each thread's last cos/sin table (a decode step ropes
// every layer at one position). Calls that change only the parameters, at
// the same position, must each get their own angles: theta, the scale,
// n_rot, and factors changed in place behind the same pointer.
TEST(Rope, CachedTableFollowsEveryParameterAtOnePosition) {
  std::mt19937 rng(5);
  const int64_t n_head = 2, head_dim = 16;
  const std::vector<int32_t> pos = {42};
  auto ff = test::random_floats(rng, head_dim / 2, 1.0f, 8.0f);
  const auto x0 = test::random_floats(rng, n_head * head_dim, -1.0f, 1.0f);
  auto check = [&](const RopeParams& p) {
    const int64_t n_rot = p.n_rot == 0 ? head_dim : p.n_rot;
    const auto want = ref_normal(x0, pos, n_head, head_dim, n_rot, p);
    auto x = x0;
    kernels::rope(x.data(), pos.data(), 1, n_head, head_dim, p);
    for (size_t k = 0; k < x.size(); ++k) ASSERT_NEAR(x[k], want[k], kRopeTol) << "theta " << p.theta << " k=" << k;
  };
  RopeParams p{.layout = RopeLayout::normal, .theta = 10000.0f};
  check(p);
  p.theta = 500000.0f;
  check(p);
  p.freq_scale = 0.25f;
  check(p);
  p.n_rot = 8;
  check(p);
  p.n_rot = 0;
  p.freq_factors = ff.data();
  check(p);
  for (float& f : ff) f *= 2.0f;  // same pointer, new values
  check(p);
  p.mscale = 1.2f;
  check(p);
  p.freq_factors = nullptr;
  check(p);
}

// The table also keeps the last call's positions (a step ropes every
// layer's q and k at the same ones). Each call must get its own positions'
// angles: new values behind the same pointer, a shorter and a longer list,
// a list that only shares a prefix.
TEST(Rope, CachedTableFollowsThePositions) {
  std::mt19937 rng(6);
  const int64_t n_head = 2, head_dim = 16;
  const RopeParams p{.layout = RopeLayout::neox, .theta = 10000.0f};
  std::vector<int32_t> pos = {5, 6, 7, 8};
  auto check = [&](const std::vector<int32_t>& at) {
    const auto x0 = test::random_floats(rng, static_cast<int64_t>(at.size()) * n_head * head_dim, -1.0f, 1.0f);
    const auto want = ref_hf(x0, at, n_head, head_dim, head_dim, p);
    auto x = x0;
    kernels::rope(x.data(), at.data(), static_cast<int64_t>(at.size()), n_head, head_dim, p);
    for (size_t k = 0; k < x.size(); ++k) ASSERT_NEAR(x[k], want[k], kRopeTol) << "pos[0] " << at[0] << " k=" << k;
  };
  check(pos);
  check(pos);  // reused
  pos[2] = 900;  // same pointer, one new value
  check(pos);
  check({5, 6});
  check({5, 6, 900, 8, 9, 10});
  check({5, 6, 901});
  check({0});
}

TEST(Rope, RejectsBadRotation) {
  float x[8] = {};
  const int32_t pos = 1;
  EXPECT_THROW(kernels::rope(x, &pos, 1, 1, 8, {.n_rot = 3}), Error);
  EXPECT_THROW(kernels::rope(x, &pos, 1, 1, 8, {.n_rot = 10}), Error);
  EXPECT_THROW(kernels::rope(x, &pos, 1, 1, 8, {.theta = 0.0f}), Error);
}

}  // namespace
}  // namespace troupe
