// The Gated DeltaNet on the GPU (kernels/cuda/gated_delta.cu) against the
// CPU kernel on the same batch: three sequences in shuffled state slots (a
// prefill from position 0 over a slot holding garbage, a chunk after one,
// a decode token), grouped and tiled value heads; then a second call that
// continues each from its slot. Outputs and states agree to 1e-4 relative
// (the GPU sums a row's products across a warp, the CPU along it).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu_backend.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe {
namespace {

using test::DeviceFloats;

void run(CudaBackend& gpu, bool tiled) {
  SCOPED_TRACE(tiled ? "tiled value heads" : "grouped value heads");
  std::mt19937 rng(5);
  const kernels::GatedDeltaShape g{.n_k_heads = 2, .n_v_heads = 4, .k_dim = 64, .v_dim = 48, .taps = 4, .tiled = tiled};
  const int64_t C = g.conv_dim(), hv = g.n_v_heads, n_slots = 4;
  auto state = test::random_floats(rng, static_cast<size_t>(n_slots * g.state_floats()), -0.5f, 0.5f);
  const auto conv_w = test::random_floats(rng, static_cast<size_t>(C * g.taps), -0.8f, 0.8f);
  std::vector<float> decay = test::random_floats(rng, static_cast<size_t>(hv), 0.1f, 3.0f);
  for (float& d : decay) d = -d;
  const auto dt_bias = test::random_floats(rng, static_cast<size_t>(hv), -1.0f, 1.0f);
  const std::vector<int32_t> table(8, 0);
  ThreadPool pool(2);
  DeviceFloats dstate(gpu, state), dw(gpu, conv_w), ddecay(gpu, decay), ddt(gpu, dt_bias);
  const PagedKvView cview{.n_blocks = 8, .block_size = 4, .state = state.data(), .n_state_slots = n_slots,
                          .state_floats = g.state_floats()};
  PagedKvView gview = cview;
  gview.state = dstate.get();
  for (const test::SlotRound& round : test::slot_rounds(table.data())) {
    const std::vector<AttnSeq>& seqs = round.seqs;
    const int32_t n = round.n_tokens;
    const auto qkv = test::random_floats(rng, static_cast<size_t>(n * C), -1.5f, 1.5f);
    const auto b = test::random_floats(rng, static_cast<size_t>(n * hv), -2.0f, 2.0f);
    const auto a = test::random_floats(rng, static_cast<size_t>(n * hv), -2.0f, 2.0f);
    DeviceFloats dqkv(gpu, qkv), db(gpu, b), da(gpu, a), dout(gpu, static_cast<size_t>(n * hv * g.v_dim));
    gpu.gated_delta_net(dout.get(), dqkv.get(), db.get(), da.get(), gview, seqs.data(), 3, dw.get(), ddecay.get(),
                        ddt.get(), g);
    std::vector<float> cqkv = qkv, want(static_cast<size_t>(n * hv * g.v_dim));
    kernels::gated_delta_net(want.data(), cqkv.data(), b.data(), a.data(), cview, seqs.data(), 3, conv_w.data(),
                             decay.data(), dt_bias.data(), g, pool);
    EXPECT_LE(test::worst_ratio(dout.read(), want, 1e-4, 1e-4), 1.0);
    EXPECT_LE(test::worst_ratio(dqkv.read(), cqkv, 1e-5, 1e-5), 1.0);  // the conv's output, in place
    EXPECT_LE(test::worst_ratio(dstate.read(), state, 1e-4, 1e-4), 1.0);
  }
}

TEST(CudaGatedDelta, MatchesTheCpu) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  run(gpu, false);
  run(gpu, true);
}

TEST(CudaGatedDelta, RefusesASlotOutsideThePool) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  const kernels::GatedDeltaShape g{.n_k_heads = 1, .n_v_heads = 1, .k_dim = 8, .v_dim = 8, .taps = 2};
  DeviceFloats state(gpu, static_cast<size_t>(2 * g.state_floats())), x(gpu, 64), out(gpu, 64);
  const std::vector<int32_t> table = {0};
  const AttnSeq seq{.q_begin = 0, .n_q = 1, .n_past = 0, .block_table = table.data(), .state_slot = 2};
  const PagedKvView view{.n_blocks = 1, .block_size = 4, .state = state.get(), .n_state_slots = 2,
                         .state_floats = g.state_floats()};
  EXPECT_THROW(gpu.gated_delta_net(out.get(), x.get(), x.get(), x.get(), view, &seq, 1, x.get(), x.get(), x.get(), g),
               Error);
}

TEST(CudaOps, SigmoidGateMatchesTheCpu) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  std::mt19937 rng(3);
  const auto y = test::random_floats(rng, 1000, -3.0f, 3.0f), gate = test::random_floats(rng, 1000, -6.0f, 6.0f);
  DeviceFloats dy(gpu, y), dg(gpu, gate);
  gpu.sigmoid_gate(dy.get(), dg.get(), 1000);
  std::vector<float> want = y;
  CpuBackend cpu({.n_threads = 1});
  cpu.sigmoid_gate(want.data(), gate.data(), 1000);
  EXPECT_LE(test::worst_ratio(dy.read(), want, 1e-6, 1e-6), 1.0);
}

}  // namespace
}  // namespace troupe
