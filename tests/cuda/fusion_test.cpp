// The op recorder's GEMV fusion rules (kernels/cuda/ops.cpp, try_fuse), on
// records alone: no GPU needed, so these run in CI. The records hold fake
// device addresses; nothing is launched. That fused launches compute what
// the single ones do is CudaMatmul.FusedGemvsEqualTheMatmulsOneByOne (GPU).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "core/dtype.hpp"
#include "kernels/cuda/ops.hpp"

namespace troupe::cuda {
namespace {

constexpr int64_t kIn = 1024;

float* at(uintptr_t a) { return reinterpret_cast<float*>(a); }

// y[n_tokens, n_out] = x · w^T as the backend records it.
Op matmul_op(float* y, const float* x, uintptr_t w, DType t, int64_t n_out, int64_t n_tokens = 1, int64_t n_in = kIn) {
  Op op(OpKind::matmul);
  op.matmul = {.y = y, .x = x, .w = reinterpret_cast<const void*>(w), .type = static_cast<int64_t>(t), .n_in = n_in,
               .n_out = n_out, .n_tokens = n_tokens};
  return op;
}

class GemvFusion : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* env = std::getenv("TROUPE_CUDA_FUSE_GEMV");
    if (env != nullptr && std::strcmp(env, "0") == 0) GTEST_SKIP() << "TROUPE_CUDA_FUSE_GEMV=0 in the environment";
  }
  // Buffers 1 MiB apart: disjoint unless a test says otherwise.
  const float* x = at(0x100000);
  float* y0 = at(0x200000);
  float* y1 = at(0x300000);
  float* y2 = at(0x400000);
  float* y3 = at(0x500000);
};

TEST_F(GemvFusion, QkvOfSixteenBitWeightsBecomeOneLaunch) {
  for (DType t : {DType::bf16, DType::f16, DType::f32}) {
    Op run = matmul_op(y0, x, 0x1000000, t, 2048, 3);
    ASSERT_TRUE(try_fuse(run, matmul_op(y1, x, 0x2000000, t, 512, 3)));
    ASSERT_EQ(run.kind, OpKind::gemv_n);
    ASSERT_TRUE(try_fuse(run, matmul_op(y2, x, 0x3000000, t, 512, 3)));
    const GemvNOp& g = run.gemv_n;
    EXPECT_EQ(g.n_mats, 3);
    EXPECT_EQ(g.y[0], y0);
    EXPECT_EQ(g.y[2], y2);
    EXPECT_EQ(g.w[1], reinterpret_cast<const void*>(0x2000000));
    EXPECT_EQ(g.n_out[0], 2048);
    EXPECT_EQ(g.n_out[1], 512);
    EXPECT_EQ(g.x, x);
    EXPECT_EQ(g.n_tokens, 3);
    EXPECT_EQ(g.n_in, kIn);
    // A launch holds three matrices at most.
    EXPECT_FALSE(try_fuse(run, matmul_op(y3, x, 0x4000000, t, 512, 3)));
    EXPECT_EQ(run.gemv_n.n_mats, 3);
  }
}

TEST_F(GemvFusion, OnlyMatmulsThatShareEverythingButTheirWeightsAndOutputs) {
  const DType t = DType::bf16;
  Op a = matmul_op(y0, x, 0x1000000, t, 256);
  EXPECT_FALSE(try_fuse(a, matmul_op(y1, at(0x180000), 0x2000000, t, 256))) << "another input";
  EXPECT_FALSE(try_fuse(a, matmul_op(y1, x, 0x2000000, DType::f16, 256))) << "another weight type";
  EXPECT_FALSE(try_fuse(a, matmul_op(y1, x, 0x2000000, t, 256, 2))) << "another token count";
  Op b = matmul_op(y0, x, 0x1000000, t, 256, 1, 512);
  EXPECT_FALSE(try_fuse(b, matmul_op(y1, x, 0x2000000, t, 256, 1, kIn))) << "another row length";
  EXPECT_EQ(a.kind, OpKind::matmul);
  EXPECT_EQ(b.kind, OpKind::matmul);
}

TEST_F(GemvFusion, NotWhereTheCudaBackendWouldTakeCublasOrTheBlockTypes) {
  // More tokens than the GEMV takes: cuBLAS runs them.
  Op big = matmul_op(y0, x, 0x1000000, DType::bf16, 256, 9);
  EXPECT_FALSE(try_fuse(big, matmul_op(y1, x, 0x2000000, DType::bf16, 256, 9)));
  // A weight the GEMV cannot read 16 bytes at a time.
  Op odd = matmul_op(y0, x, 0x1000000, DType::bf16, 256);
  EXPECT_FALSE(try_fuse(odd, matmul_op(y1, x, 0x2000008, DType::bf16, 256)));
  // Block types: not fused until measured (their fused kernels take more registers).
  for (DType t : {DType::q4_0, DType::q8_0, DType::q4_K, DType::q6_K}) {
    Op q = matmul_op(y0, x, 0x1000000, t, 256);
    EXPECT_FALSE(try_fuse(q, matmul_op(y1, x, 0x2000000, t, 256))) << dtype_name(t);
  }
}

TEST_F(GemvFusion, NeverWhenAnOutputOverlapsTheInputOrAnotherOutput) {
  const DType t = DType::bf16;
  // The second output starts inside the first (256 floats from y0).
  Op a = matmul_op(y0, x, 0x1000000, t, 256);
  EXPECT_FALSE(try_fuse(a, matmul_op(y0 + 100, x, 0x2000000, t, 256)));
  // An output over the input: one launch would read what it writes.
  Op b = matmul_op(y0, x, 0x1000000, t, 256);
  EXPECT_FALSE(try_fuse(b, matmul_op(const_cast<float*>(x) + 512, x, 0x2000000, t, 256)));
  Op c = matmul_op(const_cast<float*>(x), x, 0x1000000, t, 256);
  EXPECT_FALSE(try_fuse(c, matmul_op(y1, x, 0x2000000, t, 256)));
  // A third output overlapping the first of a fused pair.
  Op d = matmul_op(y0, x, 0x1000000, t, 256);
  ASSERT_TRUE(try_fuse(d, matmul_op(y1, x, 0x2000000, t, 256)));
  EXPECT_FALSE(try_fuse(d, matmul_op(y0 + 255, x, 0x3000000, t, 256)));
  EXPECT_EQ(d.gemv_n.n_mats, 2);
}

}  // namespace
}  // namespace troupe::cuda
