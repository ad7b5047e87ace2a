// Tensor parallelism: a Megatron MLP (column-parallel gate and up, SwiGLU,
// row-parallel down with an all-reduce) over every visible GPU, against the
// CPU matmuls on the same bf16 weights. One GPU gives world size 1 (the
// all-reduce is then a copy); more GPUs split the weights for real.
// Tolerance: 1e-4 of the output scale; every product here has <= 8 tokens,
// so the GEMV path keeps f32 activations and only summation order differs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/thread_pool.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu_kernels.hpp"

#if defined(TROUPE_HAVE_NCCL)
#include "kernels/cuda/tensor_parallel.hpp"
#endif

namespace troupe {
namespace {

#if defined(TROUPE_HAVE_NCCL)

TEST(CudaTensorParallel, MegatronMlpOverEveryVisibleGpuMatchesTheCpu) {
  TROUPE_REQUIRE_GPU();
  cuda::TensorParallelGroup group;
  const int world = group.world_size();
  ASSERT_GE(world, 1);
  RecordProperty("world_size", world);
  const int64_t n_tokens = 4, n_embd = 256, n_ff = 512 * world;
  std::mt19937 rng(31);
  auto bf16_values = [&](int64_t n, float scale) {
    std::vector<float> v = test::random_floats(rng, static_cast<size_t>(n), -scale, scale);
    for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
    return v;
  };
  const auto w_gate = bf16_values(n_ff * n_embd, 0.1f);
  const auto w_up = bf16_values(n_ff * n_embd, 0.1f);
  const auto w_down = bf16_values(n_embd * n_ff, 0.05f);
  const auto x = test::random_floats(rng, n_tokens * n_embd, -1.0f, 1.0f);

  // CPU reference.
  ThreadPool pool(2);
  std::vector<float> gate(n_tokens * n_ff), up(gate.size()), want(n_tokens * n_embd);
  kernels::matmul(gate.data(), x.data(), w_gate.data(), DType::f32, n_tokens, n_embd, n_ff, pool);
  kernels::matmul(up.data(), x.data(), w_up.data(), DType::f32, n_tokens, n_embd, n_ff, pool);
  kernels::swiglu(gate.data(), gate.data(), up.data(), n_tokens * n_ff);
  kernels::matmul(want.data(), gate.data(), w_down.data(), DType::f32, n_tokens, n_ff, n_embd, pool);

  using cuda::TpSplit;
  const auto tg = group.shard({.data = w_gate.data(), .type = DType::f32, .n_in = n_embd, .n_out = n_ff},
                              TpSplit::columns);
  const auto tu = group.shard({.data = w_up.data(), .type = DType::f32, .n_in = n_embd, .n_out = n_ff},
                              TpSplit::columns);
  const auto td = group.shard({.data = w_down.data(), .type = DType::f32, .n_in = n_ff, .n_out = n_embd},
                              TpSplit::rows);
  const int64_t local_ff = n_ff / world;
  std::vector<float*> dx(world), dg(world), du(world), dy(world);
  std::vector<const float*> cx(world), cg(world);
  for (int r = 0; r < world; ++r) {
    dx[r] = group.alloc(r, n_tokens * n_embd);
    group.upload(r, dx[r], x.data(), n_tokens * n_embd);
    dg[r] = group.alloc(r, n_tokens * local_ff);
    du[r] = group.alloc(r, n_tokens * local_ff);
    dy[r] = group.alloc(r, n_tokens * n_embd);
    cx[r] = dx[r];
    cg[r] = dg[r];
  }
  group.column_parallel(dg, cx, tg, n_tokens);
  group.column_parallel(du, cx, tu, n_tokens);
  for (int r = 0; r < world; ++r) group.swiglu(r, dg[r], dg[r], du[r], n_tokens * local_ff);
  group.row_parallel(dy, cg, td, n_tokens);
  group.synchronize();

  double scale = 0;
  for (float v : want) scale = std::max(scale, std::abs(static_cast<double>(v)));
  for (int r = 0; r < world; ++r) {
    std::vector<float> got(want.size());
    group.download(r, got.data(), dy[r], n_tokens * n_embd);
    EXPECT_LE(test::worst_ratio(got, want, 1e-4 * scale, 0.0), 1.0) << "rank " << r << " of " << world;
  }
}

#else

TEST(CudaTensorParallel, MegatronMlpOverEveryVisibleGpuMatchesTheCpu) {
  GTEST_SKIP() << "built without NCCL: tensor parallelism is not compiled in";
}

#endif

}  // namespace
}  // namespace troupe
