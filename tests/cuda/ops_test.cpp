// The CUDA backend's elementwise, norm, RoPE, embedding and gather ops
// against the CPU kernels (kernels/cpu_kernels.hpp) on the same inputs.
// Tolerances: 1e-5 relative (+1e-6 absolute) for f32 math, where only the
// order of fp32 sums and fused multiply-adds differ; the activations (whose
// CPU kernels use their own exp/tanh approximations) are also checked against
// their definitions in double; embedding rows are dequantized with the same
// formulas, so 1e-6.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu_backend.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe {
namespace {

using test::DeviceFloats;
using test::random_floats;
using test::worst_ratio;

constexpr double kAbs = 1e-6;
constexpr double kRel = 1e-5;

TEST(CudaOps, RmsNormAndLayerNormMatchTheCpu) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  std::mt19937 rng(1);
  for (int64_t n_embd : {8, 64, 576, 4096, 5000}) {
    SCOPED_TRACE(n_embd);
    const int64_t n_tokens = 7;
    const auto x = random_floats(rng, n_tokens * n_embd, -3.0f, 3.0f);
    const auto w = random_floats(rng, n_embd, 0.5f, 1.5f);
    const auto b = random_floats(rng, n_embd, -1.0f, 1.0f);
    std::vector<float> want(x.size());
    DeviceFloats dx(gpu, x), dw(gpu, w), db(gpu, b), dy(gpu, x.size());

    kernels::rmsnorm(want.data(), x.data(), w.data(), n_tokens, n_embd, 1e-5f);
    gpu.rmsnorm(dy.get(), dx.get(), dw.get(), n_tokens, n_embd, 1e-5f);
    EXPECT_LE(worst_ratio(dy.read(), want, kAbs, kRel), 1.0) << "rmsnorm";

    kernels::layernorm(want.data(), x.data(), w.data(), b.data(), n_tokens, n_embd, 1e-5f);
    gpu.layernorm(dy.get(), dx.get(), dw.get(), db.get(), n_tokens, n_embd, 1e-5f);
    EXPECT_LE(worst_ratio(dy.read(), want, kAbs, kRel), 1.0) << "layernorm";

    kernels::layernorm(want.data(), x.data(), w.data(), nullptr, n_tokens, n_embd, 1e-5f);
    gpu.layernorm(dy.get(), dx.get(), dw.get(), nullptr, n_tokens, n_embd, 1e-5f);
    EXPECT_LE(worst_ratio(dy.read(), want, kAbs, kRel), 1.0) << "layernorm without bias";

    // In place, as the model's final norm runs.
    kernels::rmsnorm(want.data(), x.data(), w.data(), n_tokens, n_embd, 1e-6f);
    gpu.rmsnorm(dx.get(), dx.get(), dw.get(), n_tokens, n_embd, 1e-6f);
    EXPECT_LE(worst_ratio(dx.read(), want, kAbs, kRel), 1.0) << "rmsnorm in place";
  }
}

TEST(CudaOps, ResidualAddFusedWithRmsNormMatchesTheTwoSteps) {
  TROUPE_REQUIRE_GPU();
  // With graphs on, ops wait for the sync point, so add + rmsnorm fuse.
  for (bool graphs : {false, true}) {
    CudaBackend gpu(test::small_options(graphs));
    std::mt19937 rng(2);
    const int64_t n_tokens = 5, n_embd = 1000;
    auto x = random_floats(rng, n_tokens * n_embd, -2.0f, 2.0f);
    const auto r = random_floats(rng, x.size(), -2.0f, 2.0f);
    const auto w = random_floats(rng, n_embd, 0.5f, 1.5f);
    DeviceFloats dx(gpu, x), dr(gpu, r), dw(gpu, w), dy(gpu, x.size());
    const int64_t fused_before = gpu.stats().fused_ops;
    gpu.add(dx.get(), dr.get(), n_tokens * n_embd);
    gpu.rmsnorm(dy.get(), dx.get(), dw.get(), n_tokens, n_embd, 1e-5f);
    EXPECT_EQ(gpu.stats().fused_ops, fused_before + 1);

    for (size_t i = 0; i < x.size(); ++i) x[i] += r[i];
    std::vector<float> want(x.size());
    kernels::rmsnorm(want.data(), x.data(), w.data(), n_tokens, n_embd, 1e-5f);
    EXPECT_LE(worst_ratio(dy.read(), want, kAbs, kRel), 1.0) << "normed output, graphs=" << graphs;
    EXPECT_LE(worst_ratio(dx.read(), x, 0.0, 0.0), 1.0) << "residual stream, graphs=" << graphs;
  }
}

TEST(CudaOps, ElementwiseOpsMatchTheCpu) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  std::mt19937 rng(3);
  const int64_t n_rows = 9, n_cols = 333, n = n_rows * n_cols;
  const auto a = random_floats(rng, n, -6.0f, 6.0f);
  const auto b = random_floats(rng, n, -2.0f, 2.0f);
  const auto bias = random_floats(rng, n_cols, -1.0f, 1.0f);
  DeviceFloats da(gpu, a), db(gpu, b), dbias(gpu, bias), dy(gpu, n);
  std::vector<float> want(n);

  // The activations against their definitions in double (the CPU kernels'
  // own bound, 1e-6 + 1e-5 relative), and against the CPU kernels (each
  // within that bound of exact: twice it).
  std::vector<float> exact(n);
  for (int64_t i = 0; i < n; ++i) exact[i] = static_cast<float>(a[i] / (1.0 + std::exp(-double{a[i]})) * b[i]);
  kernels::swiglu(want.data(), a.data(), b.data(), n);
  gpu.swiglu(dy.get(), da.get(), db.get(), n);
  EXPECT_LE(worst_ratio(dy.read(), exact, kAbs, kRel), 1.0) << "swiglu vs definition";
  EXPECT_LE(worst_ratio(dy.read(), want, 2 * kAbs, 2 * kRel), 1.0) << "swiglu vs cpu";

  for (int64_t i = 0; i < n; ++i) {
    const double v = a[i];
    exact[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
  }
  kernels::gelu(want.data(), a.data(), n);
  gpu.gelu(dy.get(), da.get(), n);
  EXPECT_LE(worst_ratio(dy.read(), exact, kAbs, kRel), 1.0) << "gelu vs definition";
  EXPECT_LE(worst_ratio(dy.read(), want, 2 * kAbs, 2 * kRel), 1.0) << "gelu vs cpu";

  // GeGLU: the GELU above times b, against the CPU backend's (gelu, then the
  // product); in place over the gate too, as the Gemma FFN runs it.
  CpuBackend cpu({.n_threads = 1});
  cpu.geglu(want.data(), a.data(), b.data(), n);
  for (int64_t i = 0; i < n; ++i) exact[i] = static_cast<float>(double{exact[i]} * b[i]);
  gpu.geglu(dy.get(), da.get(), db.get(), n);
  EXPECT_LE(worst_ratio(dy.read(), exact, 2 * kAbs, 2 * kRel), 1.0) << "geglu vs definition";
  EXPECT_LE(worst_ratio(dy.read(), want, 2 * kAbs, 2 * kRel), 1.0) << "geglu vs cpu";
  const std::vector<float> geglu_out = dy.read();
  dy.put(a);
  gpu.geglu(dy.get(), dy.get(), db.get(), n);
  EXPECT_LE(worst_ratio(dy.read(), geglu_out, 0.0, 0.0), 1.0) << "geglu in place";

  // ModernBERT's GeGLU: the exact (erf) GELU times b.
  for (int64_t i = 0; i < n; ++i) {
    const double v = a[i];
    exact[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))) * b[i]);
  }
  cpu.geglu_erf(want.data(), a.data(), b.data(), n);
  gpu.geglu_erf(dy.get(), da.get(), db.get(), n);
  EXPECT_LE(worst_ratio(dy.read(), exact, 2 * kAbs, 2 * kRel), 1.0) << "geglu_erf vs definition";
  EXPECT_LE(worst_ratio(dy.read(), want, 2 * kAbs, 2 * kRel), 1.0) << "geglu_erf vs cpu";

  // DistilBERT's head: ReLU, exact, in place as the head runs it.
  for (int64_t i = 0; i < n; ++i) exact[i] = std::max(a[i], 0.0f);
  dy.put(a);
  gpu.relu(dy.get(), dy.get(), n);
  EXPECT_LE(worst_ratio(dy.read(), exact, 0.0, 0.0), 1.0) << "relu";
  cpu.relu(want.data(), a.data(), n);
  EXPECT_LE(worst_ratio(want, exact, 0.0, 0.0), 1.0) << "cpu relu";

  // Apertus's xIELU, its eps crossed by inputs near zero, against its
  // definition in double and the CPU backend's; in place as the MLP runs it.
  {
    const float ap = 0.7f, an = 1.1f, beta = 0.45f, eps = -0.02f;
    for (int64_t i = 0; i < n; ++i) {
      const double v = a[i];
      exact[i] = static_cast<float>(v > 0 ? ap * v * v + beta * v
                                          : (std::expm1(std::min(v, double{eps})) - v) * an + beta * v);
    }
    cpu.xielu(want.data(), a.data(), n, ap, an, beta, eps);
    dy.put(a);
    gpu.xielu(dy.get(), dy.get(), n, ap, an, beta, eps);
    EXPECT_LE(worst_ratio(dy.read(), exact, kAbs, kRel), 1.0) << "xielu vs definition";
    EXPECT_LE(worst_ratio(dy.read(), want, 2 * kAbs, 2 * kRel), 1.0) << "xielu vs cpu";
  }

  // gpt-oss's clamped SwiGLU, with a limit the inputs cross on both sides.
  const float limit = 1.5f, alpha = 1.702f;
  for (int64_t i = 0; i < n; ++i) {
    const double g = std::min(double{a[i]}, double{limit});
    const double u = std::clamp(double{b[i]}, -double{limit}, double{limit});
    exact[i] = static_cast<float>((u + 1.0) * g / (1.0 + std::exp(-alpha * g)));
  }
  kernels::swiglu_oai(want.data(), a.data(), b.data(), n, alpha, limit);
  gpu.swiglu_oai(dy.get(), da.get(), db.get(), n, alpha, limit);
  EXPECT_LE(worst_ratio(dy.read(), exact, 2 * kAbs, 2 * kRel), 1.0) << "swiglu_oai vs definition";
  EXPECT_LE(worst_ratio(dy.read(), want, 2 * kAbs, 2 * kRel), 1.0) << "swiglu_oai vs cpu";

  dy.put(a);
  gpu.scale(dy.get(), 8.0f, n);
  for (int64_t i = 0; i < n; ++i) want[i] = a[i] * 8.0f;
  EXPECT_LE(worst_ratio(dy.read(), want, 0.0, 0.0), 1.0) << "scale";

  // Gemma 2's logit soft-cap, against its definition and the CPU backend.
  dy.put(a);
  gpu.soft_cap(dy.get(), 0.7f, n);
  want = a;
  cpu.soft_cap(want.data(), 0.7f, n);
  for (int64_t i = 0; i < n; ++i) exact[i] = static_cast<float>(0.7 * std::tanh(double{a[i]} / 0.7));
  EXPECT_LE(worst_ratio(dy.read(), exact, kAbs, kRel), 1.0) << "soft_cap vs definition";
  EXPECT_LE(worst_ratio(dy.read(), want, 2 * kAbs, 2 * kRel), 1.0) << "soft_cap vs cpu";

  dy.put(a);
  gpu.add(dy.get(), db.get(), n);
  for (int64_t i = 0; i < n; ++i) want[i] = a[i] + b[i];
  EXPECT_LE(worst_ratio(dy.read(), want, 0.0, 0.0), 1.0) << "add";

  dy.put(a);
  gpu.add_bias(dy.get(), dbias.get(), n_rows, n_cols);
  for (int64_t i = 0; i < n; ++i) want[i] = a[i] + bias[i % n_cols];
  EXPECT_LE(worst_ratio(dy.read(), want, 0.0, 0.0), 1.0) << "add_bias";

  // SwiGLU in place over the gate, as the FFN runs it: what it gave out of place.
  gpu.swiglu(dy.get(), da.get(), db.get(), n);
  const std::vector<float> out_of_place = dy.read();
  dy.put(a);
  gpu.swiglu(dy.get(), dy.get(), db.get(), n);
  EXPECT_LE(worst_ratio(dy.read(), out_of_place, 0.0, 0.0), 1.0) << "swiglu in place";

  const std::vector<int32_t> rows{8, 0, 3, 3, 7};
  DeviceFloats dg(gpu, rows.size() * n_cols);
  gpu.gather_rows(dg.get(), da.get(), rows.data(), static_cast<int64_t>(rows.size()), n_cols);
  std::vector<float> gathered(rows.size() * n_cols);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(a.begin() + rows[i] * n_cols, n_cols, gathered.begin() + static_cast<int64_t>(i) * n_cols);
  }
  EXPECT_LE(worst_ratio(dg.read(), gathered, 0.0, 0.0), 1.0) << "gather_rows";
}

TEST(CudaOps, RopeOnQAndKMatchesTheCpuInBothLayouts) {
  TROUPE_REQUIRE_GPU();
  for (bool graphs : {false, true}) {
    CudaBackend gpu(test::small_options(graphs));
    std::mt19937 rng(4);
    const int64_t n_tokens = 6, n_head = 8, n_head_kv = 2, head_dim = 64;
    std::vector<float> factors(24);
    for (float& f : factors) f = std::uniform_real_distribution<float>(1.0f, 8.0f)(rng);
    for (kernels::RopeLayout layout : {kernels::RopeLayout::normal, kernels::RopeLayout::neox}) {
      for (int64_t n_rot : {int64_t{0}, int64_t{48}}) {
        SCOPED_TRACE(std::to_string(static_cast<int>(layout)) + " n_rot=" + std::to_string(n_rot));
        const kernels::RopeParams p{.layout = layout,
                                    .n_rot = n_rot,
                                    .theta = 500000.0f,
                                    .freq_scale = 0.25f,
                                    .freq_factors = n_rot == 48 ? factors.data() : nullptr,
                                    .mscale = n_rot == 48 ? 1.19f : 1.0f};  // LongRoPE's attention factor
        // Positions up to 100k: the angle must be formed in double, as on the CPU.
        const std::vector<int32_t> pos{0, 1, 17, 4095, 32768, 99999};
        auto q = random_floats(rng, n_tokens * n_head * head_dim, -1.0f, 1.0f);
        auto k = random_floats(rng, n_tokens * n_head_kv * head_dim, -1.0f, 1.0f);
        DeviceFloats dq(gpu, q), dk(gpu, k);
        gpu.rope(dq.get(), pos.data(), n_tokens, n_head, head_dim, p);
        gpu.rope(dk.get(), pos.data(), n_tokens, n_head_kv, head_dim, p);
        kernels::rope(q.data(), pos.data(), n_tokens, n_head, head_dim, p);
        kernels::rope(k.data(), pos.data(), n_tokens, n_head_kv, head_dim, p);
        EXPECT_LE(worst_ratio(dq.read(), q, kAbs, kRel), 1.0) << "q";
        EXPECT_LE(worst_ratio(dk.read(), k, kAbs, kRel), 1.0) << "k";
      }
    }
    if (graphs) {
      EXPECT_GT(gpu.stats().fused_ops, 0) << "rope of q and k should fuse into one launch";
    }
  }
}

TEST(CudaOps, EmbeddingOfEveryWeightTypeMatchesTheCpu) {
  TROUPE_REQUIRE_GPU();
  CudaBackendOptions opt = test::small_options();
  opt.f32_weights = WeightPrecision::f32;  // keep the f32 table as it is
  CudaBackend gpu(opt);
  std::mt19937 rng(5);
  const int64_t n_vocab = 50, n_embd = 96;
  const std::vector<int32_t> ids{0, 49, 7, 7, 23};
  const auto n_tokens = static_cast<int64_t>(ids.size());
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                  DType::q2_K, DType::q3_K, DType::q4_K, DType::q5_K, DType::q6_K, DType::iq4_nl, DType::iq4_xs,
                  DType::mxfp4}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int64_t ne = dtype_info(t).block_size > n_embd ? dtype_info(t).block_size : n_embd;  // whole k-quant blocks
    const auto src = random_floats(rng, n_vocab * ne, -1.0f, 1.0f);
    const int64_t rb = row_bytes(t, ne);
    std::vector<uint8_t> table(static_cast<size_t>(rb * n_vocab));
    for (int64_t r = 0; r < n_vocab; ++r) quantize_row(t, src.data() + r * ne, table.data() + r * rb, ne);
    const Weight dev = gpu.upload_weight({.data = table.data(), .type = t, .n_in = ne, .n_out = n_vocab});
    EXPECT_EQ(dev.type, t);
    std::vector<float> want(n_tokens * ne);
    kernels::embedding(want.data(), table.data(), t, ids.data(), n_tokens, ne);
    DeviceFloats dy(gpu, want.size());
    gpu.embedding(dy.get(), dev, ids.data(), n_tokens);
    EXPECT_LE(worst_ratio(dy.read(), want, 1e-6, 1e-6), 1.0);
    gpu.deallocate(const_cast<void*>(dev.data));
  }
  EXPECT_EQ(gpu.stats().weight_bytes, 0u);
  // Out-of-table ids are refused on the host: a kernel cannot throw.
  const std::vector<float> src(n_vocab * n_embd, 0.5f);
  const Weight dev = gpu.upload_weight({.data = src.data(), .type = DType::f32, .n_in = n_embd, .n_out = n_vocab});
  DeviceFloats dy(gpu, n_embd);
  const int32_t bad = 50;
  EXPECT_THROW(gpu.embedding(dy.get(), dev, &bad, 1), Error);
}

TEST(CudaOps, F32MatricesAreStoredAsBf16AndVectorsStayF32) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  std::mt19937 rng(6);
  const int64_t n_in = 64, n_out = 10;
  const auto w = random_floats(rng, n_in * n_out, -1.0f, 1.0f);
  const Weight m = gpu.upload_weight({.data = w.data(), .type = DType::f32, .n_in = n_in, .n_out = n_out});
  EXPECT_EQ(m.type, DType::bf16);
  const Weight v = gpu.upload_weight({.data = w.data(), .type = DType::f32, .n_in = n_in, .n_out = 1});
  EXPECT_EQ(v.type, DType::f32);
  // The bf16 copy is core/dtype's round-to-nearest-even conversion: read it
  // back through the embedding gather.
  const std::vector<int32_t> ids{3};
  DeviceFloats dy(gpu, n_in);
  gpu.embedding(dy.get(), m, ids.data(), 1);
  std::vector<float> want(n_in);
  for (int64_t i = 0; i < n_in; ++i) want[i] = bf16_to_f32(f32_to_bf16(w[3 * n_in + i]));
  EXPECT_LE(worst_ratio(dy.read(), want, 0.0, 0.0), 1.0);
}

}  // namespace
}  // namespace troupe
