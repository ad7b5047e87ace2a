// Mamba-2's scan on the GPU (kernels/cuda/gated_delta.cu) against the CPU
// kernel on the same batch: three sequences in shuffled state slots (a
// prefill from position 0 over a slot holding garbage, a short prompt, a
// decode token), B and C in two groups; then a second call that continues
// each from its slot. Outputs, the convolved proj and the states agree to
// 1e-4 relative.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe {
namespace {

using test::DeviceFloats;

TEST(CudaMamba2, MatchesTheCpu) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  std::mt19937 rng(8);
  const kernels::Mamba2Shape g{.n_heads = 4, .head_dim = 32, .d_state = 16, .n_groups = 2, .taps = 4};
  const int64_t W = g.proj_width(), n_slots = 4;
  auto state = test::random_floats(rng, static_cast<size_t>(n_slots * g.state_floats()), -0.5f, 0.5f);
  const auto conv = test::random_floats(rng, static_cast<size_t>(g.conv_dim() * g.taps), -0.8f, 0.8f);
  const auto conv_b = test::random_floats(rng, static_cast<size_t>(g.conv_dim()), -0.2f, 0.2f);
  std::vector<float> a = test::random_floats(rng, static_cast<size_t>(g.n_heads), 0.1f, 3.0f);
  for (float& x : a) x = -x;
  const auto dt_bias = test::random_floats(rng, static_cast<size_t>(g.n_heads), -1.0f, 1.0f);
  const auto d = test::random_floats(rng, static_cast<size_t>(g.n_heads), -1.0f, 1.0f);
  const auto norm = test::random_floats(rng, static_cast<size_t>(g.inner()), 0.5f, 1.5f);
  DeviceFloats dstate(gpu, state), dconv(gpu, conv), dconv_b(gpu, conv_b), da(gpu, a), ddt(gpu, dt_bias), dd(gpu, d),
      dnorm(gpu, norm);
  const kernels::Mamba2Weights cw{.conv = conv.data(), .conv_bias = conv_b.data(), .a = a.data(),
                                  .dt_bias = dt_bias.data(), .d = d.data(), .norm = norm.data(), .norm_eps = 1e-5f};
  const kernels::Mamba2Weights gw{.conv = dconv.get(), .conv_bias = dconv_b.get(), .a = da.get(), .dt_bias = ddt.get(),
                                  .d = dd.get(), .norm = dnorm.get(), .norm_eps = 1e-5f};
  const std::vector<int32_t> table(8, 0);
  const PagedKvView cview{.n_blocks = 8, .block_size = 4, .state = state.data(), .n_state_slots = n_slots,
                          .state_floats = g.state_floats()};
  PagedKvView gview = cview;
  gview.state = dstate.get();
  ThreadPool pool(2);
  for (const test::SlotRound& round : test::slot_rounds(table.data())) {
    const std::vector<AttnSeq>& seqs = round.seqs;
    const int32_t n = round.n_tokens;
    const auto proj = test::random_floats(rng, static_cast<size_t>(n * W), -1.5f, 1.5f);
    DeviceFloats dproj(gpu, proj), dy(gpu, static_cast<size_t>(n * g.inner()));
    gpu.mamba2_scan(dy.get(), dproj.get(), gview, seqs.data(), 3, gw, g);
    std::vector<float> cproj = proj, want(static_cast<size_t>(n * g.inner()));
    kernels::mamba2_scan(want.data(), cproj.data(), cview, seqs.data(), 3, cw, g, pool);
    EXPECT_LE(test::worst_ratio(dy.read(), want, 1e-4, 1e-4), 1.0);
    EXPECT_LE(test::worst_ratio(dproj.read(), cproj, 1e-5, 1e-5), 1.0);
    EXPECT_LE(test::worst_ratio(dstate.read(), state, 1e-4, 1e-4), 1.0);
  }
}

}  // namespace
}  // namespace troupe
