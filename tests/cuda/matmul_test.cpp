// CUDA matmul for every weight dtype and both paths (the dequantizing GEMV
// for n_tokens <= 8, cuBLAS beyond) against the exact product (a double dot
// of the dequantized weights) and the CPU matmul on the same weight bytes.
//
// Tolerance: |y - ref| <= tol * sum_i |w_i x_i| (outputs may cancel, so the
// scale is the sum of magnitudes). The GEMV keeps f32 activations and
// accumulates in f32, like the CPU: only the summation order differs, so
// tol = 1e-5 (see tests/kernels/matmul_test.cpp for that bound). The GEMM
// path rounds activations (and dequantized weights) to bf16 or f16, a
// relative error of at most 2^-9 per product: tol = 1e-2, the usual 16-bit
// tolerance. f32 weights kept as f32 use SGEMM without TF32: tol = 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "core/dtype.hpp"
#include "core/thread_pool.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu_kernels.hpp"
#include "tests/exact_math.hpp"

namespace troupe {
namespace {

using test::DeviceFloats;
using test::random_floats;

void check_case(CudaBackend& gpu, ThreadPool& pool, std::mt19937& rng, DType t, int64_t n_tokens, int64_t n_in,
                int64_t n_out, double tol) {
  SCOPED_TRACE(std::string(dtype_name(t)) + " n_tokens=" + std::to_string(n_tokens) + " n_in=" +
               std::to_string(n_in) + " n_out=" + std::to_string(n_out));
  const auto src = random_floats(rng, n_in * n_out, -1.0f, 1.0f);
  const int64_t rb = row_bytes(t, n_in);
  std::vector<uint8_t> w(static_cast<size_t>(rb * n_out));
  std::vector<float> deq(src.size());
  for (int64_t r = 0; r < n_out; ++r) {
    quantize_row(t, src.data() + r * n_in, w.data() + r * rb, n_in);
    dequantize_row(t, w.data() + r * rb, deq.data() + r * n_in, n_in);
  }
  const auto x = random_floats(rng, n_tokens * n_in, -1.0f, 1.0f);
  std::vector<float> want(n_tokens * n_out);
  // The CPU reference keeps f32 activations: its default int8 activations
  // for quantized weights are ~2^-8 off the exact product by design.
  const test::ExactMath exact_cpu;
  kernels::matmul(want.data(), x.data(), w.data(), t, n_tokens, n_in, n_out, pool);

  const Weight dev = gpu.upload_weight({.data = w.data(), .type = t, .n_in = n_in, .n_out = n_out});
  ASSERT_EQ(dev.type, t);
  DeviceFloats dx(gpu, x), dy(gpu, want.size());
  gpu.matmul(dy.get(), dx.get(), dev, n_tokens);
  const std::vector<float> got = dy.read();
  double worst_exact = 0, worst_cpu = 0;
  for (int64_t i = 0; i < n_tokens; ++i) {
    for (int64_t o = 0; o < n_out; ++o) {
      double scale = 0, exact = 0;
      for (int64_t k = 0; k < n_in; ++k) {
        const double p = static_cast<double>(x[i * n_in + k]) * deq[o * n_in + k];
        scale += std::abs(p);
        exact += p;
      }
      const double g = got[i * n_out + o];
      const double e_exact = std::abs(g - exact), e_cpu = std::abs(g - want[i * n_out + o]);
      worst_exact = std::max(worst_exact, std::isnan(e_exact) ? INFINITY : e_exact / scale);
      worst_cpu = std::max(worst_cpu, std::isnan(e_cpu) ? INFINITY : e_cpu / scale);
    }
  }
  // Against the exact product (double dot of the dequantized weights), and
  // against the CPU kernel, itself within 1e-5 of exact.
  EXPECT_LE(worst_exact, tol);
  EXPECT_LE(worst_cpu, tol + 1e-5);
  gpu.deallocate(const_cast<void*>(dev.data));
}

TEST(CudaMatmul, EveryWeightTypeOnBothPathsMatchesTheCpu) {
  TROUPE_REQUIRE_GPU();
  CudaBackendOptions opt = test::small_options();
  opt.f32_weights = WeightPrecision::f32;
  CudaBackend gpu(opt);
  ThreadPool pool(2);
  std::mt19937 rng(11);
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                  DType::q2_K, DType::q3_K, DType::q4_K, DType::q5_K, DType::q6_K, DType::iq4_nl, DType::iq4_xs,
                  DType::mxfp4}) {
    for (int64_t n_tokens : {1, 3, 8}) check_case(gpu, pool, rng, t, n_tokens, 1024, 136, 1e-5);
    const double gemm_tol = t == DType::f32 ? 1e-5 : 1e-2;
    for (int64_t n_tokens : {9, 70}) check_case(gpu, pool, rng, t, n_tokens, 512, 200, gemm_tol);
  }
  // A row length the GEMV does not take (not a multiple of 8) goes to cuBLAS.
  check_case(gpu, pool, rng, DType::bf16, 2, 100, 30, 1e-2);
}

TEST(CudaMatmul, QuantizedPrefillDequantizesInTilesThatFitTheWorkspace) {
  TROUPE_REQUIRE_GPU();
  CudaBackendOptions opt = test::small_options();
  opt.workspace_bytes = size_t{1} << 20;  // 1 MiB: 4096-wide rows tile by ~100
  CudaBackend gpu(opt);
  ThreadPool pool(2);
  std::mt19937 rng(12);
  check_case(gpu, pool, rng, DType::q8_0, 16, 4096, 700, 1e-2);
  check_case(gpu, pool, rng, DType::q4_1, 16, 4096, 700, 1e-2);
}

// The block types' single-token GEMV with its activations staged in shared
// memory (gemv_staged.cu) sums every chunk in the plain kernel's order, so
// its outputs must equal the plain kernel's bit for bit (the plain one is
// held to the CPU above). Row lengths of 16, 64, 100 and 136 chunks: less
// than, exactly, more than and more than two 64-chunk staging steps; 37 rows
// leave the last block's other warps without a row.
TEST(CudaMatmul, StagedGemvEqualsThePlainOne) {
  TROUPE_REQUIRE_GPU();
  CudaBackendOptions on = test::small_options(), off = test::small_options();
  on.gemv_staging = GemvStaging::on;
  CudaBackend staged(on), plain(off);
  std::mt19937 rng(14);
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_K, DType::q3_K,
                  DType::q4_K, DType::q5_K, DType::q6_K, DType::iq4_nl, DType::iq4_xs,
                  DType::mxfp4}) {
    for (int64_t n_in : {512, 2048, 3200, 4352}) {
      if (n_in % dtype_info(t).block_size != 0) continue;  // 256-weight blocks: not 3200
      SCOPED_TRACE(std::string(dtype_name(t)) + " n_in=" + std::to_string(n_in));
      const int64_t n_out = 37, rb = row_bytes(t, n_in);
      const auto src = random_floats(rng, n_in * n_out, -1.0f, 1.0f);
      std::vector<uint8_t> w(static_cast<size_t>(rb * n_out));
      for (int64_t r = 0; r < n_out; ++r) quantize_row(t, src.data() + r * n_in, w.data() + r * rb, n_in);
      const auto x = random_floats(rng, n_in, -1.0f, 1.0f);
      std::vector<std::vector<float>> out;
      for (CudaBackend* gpu : {&staged, &plain}) {
        const Weight dev = gpu->upload_weight({.data = w.data(), .type = t, .n_in = n_in, .n_out = n_out});
        DeviceFloats dx(*gpu, x), dy(*gpu, static_cast<size_t>(n_out));
        gpu->matmul(dy.get(), dx.get(), dev, 1);
        out.push_back(dy.read());
        gpu->deallocate(const_cast<void*>(dev.data));
      }
      EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)), 0);
    }
  }
}

// matmul_n of q, k, v (or gate, up): the op recorder fuses GEMV matmuls of
// one x into one launch (ops.cpp, for f32/f16/bf16 weights). Each row is
// computed as the single-matrix GEMV computes it, so the outputs must equal
// those of the matmuls run one at a time (a read-back between them keeps
// them apart), bit for bit; fused_ops says whether they were fused. Row
// counts are not multiples of the kernel's 4 rows a block, so a block spans
// two matrices.
TEST(CudaMatmul, FusedGemvsEqualTheMatmulsOneByOne) {
  TROUPE_REQUIRE_GPU();
  CudaBackendOptions opt = test::small_options();
  opt.f32_weights = WeightPrecision::f32;
  CudaBackend gpu(opt);
  std::mt19937 rng(13);
  const int64_t n_in = 512;
  for (DType t : {DType::bf16, DType::f16, DType::f32, DType::q4_0, DType::q6_K}) {
    for (const std::vector<int64_t>& outs : {std::vector<int64_t>{70, 18, 18}, std::vector<int64_t>{33, 33}}) {
      for (int64_t n_tokens : {1, 5, 8}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " matrices=" + std::to_string(outs.size()) + " n_tokens=" +
                     std::to_string(n_tokens));
        std::vector<Weight> ws;
        std::vector<std::vector<uint8_t>> bytes;
        for (int64_t n_out : outs) {
          const auto src = random_floats(rng, n_in * n_out, -1.0f, 1.0f);
          const int64_t rb = row_bytes(t, n_in);
          bytes.emplace_back(static_cast<size_t>(rb * n_out));
          for (int64_t r = 0; r < n_out; ++r) {
            quantize_row(t, src.data() + r * n_in, bytes.back().data() + r * rb, n_in);
          }
          ws.push_back(gpu.upload_weight({.data = bytes.back().data(), .type = t, .n_in = n_in, .n_out = n_out}));
        }
        DeviceFloats dx(gpu, random_floats(rng, n_tokens * n_in, -1.0f, 1.0f));
        std::vector<std::unique_ptr<DeviceFloats>> fused, single;
        std::vector<Backend::MatmulOut> mo;
        for (size_t i = 0; i < outs.size(); ++i) {
          fused.push_back(std::make_unique<DeviceFloats>(gpu, static_cast<size_t>(n_tokens * outs[i])));
          single.push_back(std::make_unique<DeviceFloats>(gpu, static_cast<size_t>(n_tokens * outs[i])));
          mo.push_back({.y = fused.back()->get(), .w = &ws[i]});
        }
        const int64_t fused_before = gpu.stats().fused_ops;
        gpu.matmul_n(mo, dx.get(), n_tokens);
        std::vector<std::vector<float>> got;
        for (auto& f : fused) got.push_back(f->read());
        const int64_t fusions = gpu.stats().fused_ops - fused_before;
        EXPECT_EQ(fusions, is_quantized(t) ? 0 : static_cast<int64_t>(outs.size()) - 1);
        for (size_t i = 0; i < outs.size(); ++i) {
          gpu.matmul(single[i]->get(), dx.get(), ws[i], n_tokens);
          const std::vector<float> want = single[i]->read();
          ASSERT_EQ(got[i].size(), want.size());
          EXPECT_EQ(std::memcmp(got[i].data(), want.data(), want.size() * sizeof(float)), 0) << "matrix " << i;
        }
        for (const Weight& w : ws) gpu.deallocate(const_cast<void*>(w.data));
      }
    }
  }
}

}  // namespace
}  // namespace troupe
