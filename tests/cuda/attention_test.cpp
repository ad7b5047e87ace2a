// kv_write and paged attention on the GPU against the CPU kernels on the same
// batch: random lengths mixing prefill, chunked prefill, decode and idle
// sequences; shuffled block tables; unused cache slots holding NaN (a stray
// read poisons the output); grouped-query ratios, odd head sizes, sliding
// windows, and long decodes that take the split (flash-decoding) path.
// Tolerance: 1e-5 absolute on outputs in [-1, 1] against a plain double
// softmax (the CPU kernel's own bound), 2e-5 against the CPU kernel; the
// cache must match the CPU's exactly.
//
// Quantized caches (f16, bf16, q8_0) run the same cases: the GPU's kv_write
// must store what the CPU's row quantizer stores (bit for bit for f16/bf16,
// which both round to nearest even; for q8_0 within one step of the row's
// scale, in case a tie rounds the other way), and attention must match the
// CPU kernel over the same cache to 2e-5 and the double reference over the
// dequantized rows to 1e-5: the kernels dequantize in registers but compute
// the same values.
//
// The tensor-core prefill kernel (attention_mma.cu) computes with Q * scale,
// P and, for f32 and q8_0 caches, K and V rounded to 16 bits (bf16 for a bf16
// cache, f16 otherwise). Its rows are held to the double reference over
// inputs rounded the same way, within what rounding P adds: the output is
// sum p~_j v_j / sum p_j with p~_j = p_j (1 + e_j), |e_j| <= u (2^-11 for f16,
// 2^-8 for bf16), so it is off by at most u max|v|, plus f16's subnormal
// spacing (2^-25 absolute per key) where p is tiny. Tensor cores accumulate
// in fp32 but truncate each addition (up to 2^-23 of the addends' magnitude,
// not 2^-24), so the bound also takes (head_dim / 16 + 4) such additions per
// score, each moving the output by up to 2 max|v| per unit of score, and
// (keys / 16 + 4) per output over sum p |v| <= l max|v|; plus 1e-5 for the
// rest in fp32.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/thread_pool.hpp"
#include "cuda_test_util.hpp"
#include "kernels/cpu_kernels.hpp"
#include "kernels/kv_support.hpp"
#include "memory/kv_type.hpp"

namespace troupe {
namespace {

using test::DeviceFloats;

struct SeqSpec {
  int32_t n_past;
  int32_t n_q;
  std::vector<int32_t> open = {};  // (begin, end) blocks seen whole by their queries (AttnSeq::key_end)
};

std::vector<int32_t> key_ends(const SeqSpec& s) {
  std::vector<int32_t> ends(static_cast<size_t>(s.n_q));
  for (int32_t i = 0; i < s.n_q; ++i) ends[i] = s.n_past + i + 1;
  for (size_t j = 0; j + 1 < s.open.size(); j += 2) {
    for (int32_t p = std::max(s.open[j], s.n_past); p < s.open[j + 1]; ++p) ends[p - s.n_past] = s.open[j + 1];
  }
  return ends;
}

struct Case {
  KvType type = KvType::f32;
  int64_t n_head;
  int64_t n_head_kv;
  int64_t head_dim;
  int64_t block_size;
  int32_t window;
  float q_scale;
  std::vector<SeqSpec> seqs;
  float softcap = 0.0f;  // Gemma 2's score cap; 0: off
  bool sinks = false;    // gpt-oss's attention sinks: a random logit per head
  bool causal = true;    // false: every query sees its whole sequence (an encoder)
};

// mma_vs_cpu, if given, gets the largest |GPU - CPU kernel| over the rows
// that went through the tensor-core prefill (0 where none did).
void run_case(CudaBackend& gpu, const Case& c, uint32_t seed, double* mma_vs_cpu = nullptr) {
  SCOPED_TRACE(std::string("kv=") + kv_type_name(c.type) + " n_head=" + std::to_string(c.n_head) +
               " n_head_kv=" + std::to_string(c.n_head_kv) + " head_dim=" + std::to_string(c.head_dim) +
               " block_size=" + std::to_string(c.block_size) + " window=" + std::to_string(c.window) +
               " softcap=" + std::to_string(c.softcap) + " sinks=" + (c.sinks ? "yes" : "no") +
               " causal=" + (c.causal ? "yes" : "no") + " seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  const int64_t d = c.head_dim;
  const int64_t kv_row = c.n_head_kv * d;
  const int n_seqs = static_cast<int>(c.seqs.size());
  int64_t blocks_needed = 0;
  for (const SeqSpec& s : c.seqs) blocks_needed += (s.n_past + s.n_q + c.block_size - 1) / c.block_size;
  const int64_t n_blocks = blocks_needed + 3;
  std::vector<int32_t> phys(n_blocks);
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);

  const int64_t row_bytes = kv_row_bytes(c.type, d);
  const int64_t slot_bytes = c.n_head_kv * row_bytes;
  // Byte caches kept in floats for DeviceFloats; every byte 0xff is NaN in
  // f32, f16 and bf16, and a NaN scale in q8_0.
  const size_t cache_bytes = static_cast<size_t>(n_blocks * c.block_size * slot_bytes);
  std::vector<float> kc((cache_bytes + 3) / 4), vc(kc.size());
  std::memset(kc.data(), 0xff, kc.size() * sizeof(float));
  std::memset(vc.data(), 0xff, vc.size() * sizeof(float));
  auto bytes = [](std::vector<float>& v) { return reinterpret_cast<unsigned char*>(v.data()); };
  std::vector<std::vector<int32_t>> tables(n_seqs);
  std::vector<std::vector<int32_t>> ends(n_seqs);
  std::vector<AttnSeq> seqs(n_seqs);
  int64_t next = 0;
  int32_t n_tokens = 0;
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  for (int i = 0; i < n_seqs; ++i) {
    const SeqSpec& s = c.seqs[i];
    const int64_t nb = (s.n_past + s.n_q + c.block_size - 1) / c.block_size;
    tables[i].assign(phys.begin() + next, phys.begin() + next + nb);
    next += nb;
    // The history the cache already holds.
    std::vector<float> kr(static_cast<size_t>(d)), vr(static_cast<size_t>(d));
    for (int64_t p = 0; p < s.n_past; ++p) {
      const int64_t off = (tables[i][p / c.block_size] * c.block_size + p % c.block_size) * slot_bytes;
      for (int64_t h = 0; h < c.n_head_kv; ++h) {
        for (int64_t e = 0; e < d; ++e) {
          kr[e] = uni(rng);
          vr[e] = uni(rng);
        }
        kv_quantize_row(c.type, kr.data(), bytes(kc) + off + h * row_bytes, d);
        kv_quantize_row(c.type, vr.data(), bytes(vc) + off + h * row_bytes, d);
      }
    }
    if (!s.open.empty()) ends[i] = key_ends(s);
    seqs[i] = {.q_begin = n_tokens,
               .n_q = s.n_q,
               .n_past = s.n_past,
               .block_table = tables[i].empty() ? nullptr : tables[i].data(),
               .key_end = ends[i].empty() ? nullptr : ends[i].data()};
    n_tokens += s.n_q;
  }
  const auto k_new = test::random_floats(rng, n_tokens * kv_row, -1.0f, 1.0f);
  const auto v_new = test::random_floats(rng, n_tokens * kv_row, -1.0f, 1.0f);
  const auto q = test::random_floats(rng, std::max<int64_t>(1, n_tokens * c.n_head * d), -c.q_scale, c.q_scale);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const std::vector<float> sinks = c.sinks ? test::random_floats(rng, c.n_head, -2.0f, 4.0f) : std::vector<float>{};

  // GPU first (from the same initial cache), then the CPU reference.
  DeviceFloats dkc(gpu, kc), dvc(gpu, vc), dq(gpu, q), dout(gpu, q.size());
  DeviceFloats dk(gpu, std::max<size_t>(1, k_new.size())), dv(gpu, std::max<size_t>(1, v_new.size()));
  if (!k_new.empty()) {
    dk.put(k_new);
    dv.put(v_new);
  }
  const PagedKvView gview{.k = dkc.get(), .v = dvc.get(), .n_blocks = n_blocks, .block_size = c.block_size,
                          .n_head_kv = c.n_head_kv, .head_dim = d, .type = c.type};
  gpu.kv_write(gview, dk.get(), dv.get(), seqs.data(), n_seqs);
  DeviceFloats dsinks(gpu, c.sinks ? sinks : std::vector<float>(1, 0.0f));
  gpu.attention(dout.get(), dq.get(), gview, seqs.data(), n_seqs, c.n_head, scale, c.window, c.softcap,
                c.sinks ? dsinks.get() : nullptr, c.causal);

  const PagedKvView cview{.k = kc.data(), .v = vc.data(), .n_blocks = n_blocks, .block_size = c.block_size,
                          .n_head_kv = c.n_head_kv, .head_dim = d, .type = c.type};
  kernels::kv_write(cview, k_new.data(), v_new.data(), seqs.data(), n_seqs);
  std::vector<float> want(q.size(), 0.0f);
  ThreadPool pool(2);
  kernels::attention(want.data(), q.data(), cview, seqs.data(), n_seqs, c.n_head, scale, pool, c.window, c.softcap,
                     c.sinks ? sinks.data() : nullptr, c.causal);

  std::vector<float> gk = dkc.read(), gv = dvc.read();
  if (c.type != KvType::q8_0) {
    ASSERT_EQ(std::memcmp(gk.data(), kc.data(), cache_bytes), 0) << "K cache bytes differ";
    ASSERT_EQ(std::memcmp(gv.data(), vc.data(), cache_bytes), 0) << "V cache bytes differ";
  } else {
    // Rows the step wrote: within one quantisation step of the CPU's.
    std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d));
    for (int i = 0; i < n_seqs; ++i) {
      for (int64_t p = c.seqs[i].n_past; p < c.seqs[i].n_past + c.seqs[i].n_q; ++p) {
        const int64_t off = (tables[i][p / c.block_size] * c.block_size + p % c.block_size) * slot_bytes;
        for (int64_t h = 0; h < c.n_head_kv; ++h) {
          for (auto [g, cpu] : {std::pair{&gk, &kc}, std::pair{&gv, &vc}}) {
            kv_dequantize_row(c.type, bytes(*g) + off + h * row_bytes, a.data(), d);
            kv_dequantize_row(c.type, bytes(*cpu) + off + h * row_bytes, b.data(), d);
            const float amax = std::abs(*std::max_element(b.begin(), b.end(), [](float x, float y) {
              return std::abs(x) < std::abs(y);
            }));
            for (int64_t e = 0; e < d; ++e) {
              ASSERT_LE(std::abs(a[e] - b[e]), amax / 127.0f * 1.01f + 1e-7f) << "seq " << i << " pos " << p;
            }
          }
        }
      }
    }
  }
  const std::vector<float> got = dout.read();
  // Rows of sequences with several queries take the prefill kernel; the
  // tensor-core one where the backend chose it and head_dim allows it.
  auto through_mma = [&](int i) { return c.seqs[i].n_q > 1 && gpu.tensor_core_prefill(d); };
  std::vector<char> mma_token(static_cast<size_t>(n_tokens), 0);
  for (int i = 0; i < n_seqs; ++i) {
    if (through_mma(i)) std::fill_n(mma_token.begin() + seqs[i].q_begin, c.seqs[i].n_q, 1);
  }
  // Against the CPU kernel: each is within 1e-5 of exact, so 2e-5 of each other.
  double mma_diff = 0;
  for (int64_t i = 0; i < n_tokens * c.n_head * d; ++i) {
    if (mma_token[static_cast<size_t>(i / (c.n_head * d))]) {
      mma_diff = std::max(mma_diff, std::abs(static_cast<double>(got[i]) - want[i]));
      continue;
    }
    ASSERT_NEAR(got[i], want[i], 2e-5) << "token " << i / (c.n_head * d) << " head " << (i / d) % c.n_head
                                       << " dim " << i % d;
  }
  if (mma_vs_cpu != nullptr) *mma_vs_cpu = mma_diff;
  // Against plain double-precision softmax(q k^T * scale) v over the
  // logical (unpaged) keys and values: 1e-5, the CPU kernel's own bound.
  const int64_t group = c.n_head / c.n_head_kv;
  const KvType r16 = c.type == KvType::bf16 ? KvType::bf16 : KvType::f16;  // the mma kernel's operand type
  auto round16 = [&](std::vector<float> x) {
    std::vector<uint16_t> b(x.size());
    kv_quantize_row(r16, x.data(), b.data(), static_cast<int64_t>(x.size()));
    kv_dequantize_row(r16, b.data(), x.data(), static_cast<int64_t>(x.size()));
    return x;
  };
  const double unit = r16 == KvType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  const double subnormal = r16 == KvType::bf16 ? 0.0 : std::ldexp(1.0, -25);
  for (int i = 0; i < n_seqs; ++i) {
    const std::vector<int32_t>& table = tables[i];
    const bool mma = through_mma(i);
    // Token p's rows, dequantized (and rounded as the mma kernel rounds): [n_head_kv, head_dim].
    auto at = [&](std::vector<float>& cache, int64_t p) {
      std::vector<float> row(static_cast<size_t>(kv_row));
      const int64_t off = (table[p / c.block_size] * c.block_size + p % c.block_size) * slot_bytes;
      for (int64_t h = 0; h < c.n_head_kv; ++h) {
        kv_dequantize_row(c.type, bytes(cache) + off + h * row_bytes, row.data() + h * d, d);
      }
      return mma ? round16(std::move(row)) : row;
    };
    for (int64_t qi = 0; qi < c.seqs[i].n_q; ++qi) {
      const int64_t pos = c.seqs[i].n_past + qi;
      const int64_t first = c.window > 0 ? std::max<int64_t>(0, pos - c.window + 1) : 0;
      const int64_t own = ends[i].empty() ? pos : ends[i][qi] - 1;
      const int64_t last = c.causal ? own : c.seqs[i].n_past + c.seqs[i].n_q - 1;
      for (int64_t h = 0; h < c.n_head; ++h) {
        const int64_t kvh = h / group;
        const int64_t row = (seqs[i].q_begin + qi) * c.n_head + h;
        // The mma kernel scales Q in f32, then rounds it.
        std::vector<float> qr(q.begin() + row * d, q.begin() + (row + 1) * d);
        if (mma) {
          for (float& x : qr) x *= scale;
          qr = round16(std::move(qr));
        }
        std::vector<double> w;
        std::vector<std::vector<float>> vrows;
        double vmax = 0, dot_mag = 0;  // max |v|, max sum |q k| over the keys
        for (int64_t p = first; p <= last; ++p) {
          const std::vector<float> kp = at(kc, p);
          vrows.push_back(at(vc, p));
          for (int64_t e = 0; e < d; ++e) vmax = std::max(vmax, double(std::abs(vrows.back()[kvh * d + e])));
          double sc = 0, mag = 0;
          for (int64_t e = 0; e < d; ++e) {
            sc += double(qr[e]) * kp[kvh * d + e];
            mag += std::abs(double(qr[e]) * kp[kvh * d + e]);
          }
          dot_mag = std::max(dot_mag, mag);
          const double s = mma ? sc : sc * scale;
          w.push_back(c.softcap > 0 ? c.softcap * std::tanh(s / c.softcap) : s);  // |d/ds| <= 1: same bound
        }
        const double m = *std::max_element(w.begin(), w.end());
        double z = c.sinks ? std::exp(double(sinks[h]) - m) : 0.0;  // the sink's share of the denominator
        for (double& x : w) z += x = std::exp(x - m);
        const auto n_keys = static_cast<double>(last - first + 1);
        const double trunc = std::ldexp(1.0, -23);
        const double tol = mma ? vmax * (unit + subnormal * n_keys + 2 * (d / 16 + 4) * trunc * dot_mag +
                                         (n_keys / 16 + 4) * trunc) + 1e-5
                               : 1e-5;
        for (int64_t e = 0; e < d; ++e) {
          double o = 0;
          for (int64_t p = first; p <= last; ++p) o += w[p - first] / z * vrows[p - first][kvh * d + e];
          ASSERT_NEAR(got[row * d + e], o, tol) << (mma ? "rounded: " : "exact: ") << "seq " << i << " query "
                                                << qi << " head " << h << " dim " << e;
        }
      }
    }
  }
}

std::vector<SeqSpec> random_batch(std::mt19937& rng) {
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<SeqSpec> b = {{0, uni(1, 80)}, {uni(1, 40), uni(2, 40)}, {uni(1, 300), 1}, {uni(1, 70), 1}, {0, 1},
                            {uni(0, 30), 0}};
  std::shuffle(b.begin(), b.end(), rng);
  return b;
}

TEST(CudaAttention, MatchesTheCpuAcrossRatiosBlockSizesWindowsAndHeadSizes) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  std::mt19937 rng(2024);
  uint32_t seed = 1;
  for (int64_t ratio : {1, 2, 4}) {
    for (int64_t block_size : {16, 4}) {
      for (int32_t window : {0, 9}) {
        for (int64_t head_dim : {64, 128, 8, 13, 80, 256}) {
          const Case c{.n_head = 2 * ratio, .n_head_kv = 2, .head_dim = head_dim, .block_size = block_size,
                       .window = window, .q_scale = seed % 3 == 0 ? 6.0f : 1.0f, .seqs = random_batch(rng)};
          run_case(gpu, c, seed++);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(CudaAttention, OddGroupSizesAndMultiQuery) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  std::mt19937 rng(77);
  for (auto [n_head, n_head_kv] : {std::pair<int64_t, int64_t>{6, 1}, {14, 2}, {3, 1}, {32, 8}}) {
    const Case c{.n_head = n_head, .n_head_kv = n_head_kv, .head_dim = 32, .block_size = 16, .window = 0,
                 .q_scale = 2.0f, .seqs = random_batch(rng)};
    run_case(gpu, c, 99);
    if (HasFatalFailure()) return;
  }
}

TEST(CudaAttention, LongContextDecodeSplitsAndSlidingWindow) {
  TROUPE_REQUIRE_GPU();
  // Graphs on: the ops are recorded and launched at the read-back, as in a step.
  CudaBackend gpu(test::small_options(true));
  for (int32_t window : {0, 256, 1000}) {
    const Case c{.n_head = 8, .n_head_kv = 2, .head_dim = 128, .block_size = 16, .window = window, .q_scale = 3.0f,
                 .seqs = {{3000, 1}, {700, 40}, {1023, 1}, {5, 1}}};
    run_case(gpu, c, 5 + static_cast<uint32_t>(window));
    if (HasFatalFailure()) return;
  }
  // A single decode over 6000 positions: many splits, then the reduce.
  const Case single{.n_head = 4, .n_head_kv = 4, .head_dim = 64, .block_size = 32, .window = 0, .q_scale = 4.0f,
                    .seqs = {{6000, 1}}};
  run_case(gpu, single, 8);
}

TEST(CudaAttention, QuantizedCachesMatchTheCpu) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options());
  std::mt19937 rng(4242);
  uint32_t seed = 300;
  for (KvType type : {KvType::f16, KvType::bf16, KvType::q8_0}) {
    // q8_0 on CUDA takes whole groups of 32 (kernels/kv_support.cpp).
    const std::vector<int64_t> dims = type == KvType::q8_0 ? std::vector<int64_t>{32, 64, 96, 128, 256}
                                                            : std::vector<int64_t>{8, 13, 64, 80, 128, 256};
    for (int64_t head_dim : dims) {
      for (int64_t ratio : {1, 4}) {
        const Case c{.type = type, .n_head = 2 * ratio, .n_head_kv = 2, .head_dim = head_dim,
                     .block_size = seed % 2 == 0 ? 16 : 4, .window = seed % 3 == 0 ? 9 : 0,
                     .q_scale = seed % 5 == 0 ? 6.0f : 1.0f, .seqs = random_batch(rng)};
        run_case(gpu, c, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST(CudaAttention, QuantizedLongContextDecodeSplits) {
  TROUPE_REQUIRE_GPU();
  CudaBackend gpu(test::small_options(true));
  for (KvType type : {KvType::f16, KvType::bf16, KvType::q8_0}) {
    const Case c{.type = type, .n_head = 8, .n_head_kv = 2, .head_dim = 128, .block_size = 16, .window = 0,
                 .q_scale = 3.0f, .seqs = {{3000, 1}, {700, 40}, {5, 1}}};
    run_case(gpu, c, 17);
    if (HasFatalFailure()) return;
  }
}

// The tensor-core prefill (attention_mma.cu) on every cache type and the
// head sizes models use, against the double reference over the inputs it
// rounds (the file comment derives the bound); decode rows in the same
// batch still take the fp32 kernel and its 2e-5. Long prompts cross many
// 64-key tiles and several 32-query tiles, with and without a window.
TEST(CudaAttention, TensorCorePrefillMatchesTheRoundedReference) {
  TROUPE_REQUIRE_GPU();
  CudaBackendOptions opt = test::small_options();
  opt.prefill_attention = PrefillAttention::tensor_cores;
  CudaBackend gpu(opt);
  if (!gpu.tensor_core_prefill()) GTEST_SKIP() << "the tensor-core prefill needs compute capability 8.0 or newer";
  std::mt19937 rng(606);
  uint32_t seed = 600;
  for (KvType type : {KvType::f32, KvType::f16, KvType::bf16, KvType::q8_0}) {
    const std::vector<int64_t> dims = type == KvType::q8_0 ? std::vector<int64_t>{32, 64, 96, 128, 256}
                                                            : std::vector<int64_t>{16, 64, 80, 128, 256, 13};
    for (int64_t head_dim : dims) {
      for (int64_t ratio : {1, 4}) {
        const Case c{.type = type, .n_head = 2 * ratio, .n_head_kv = 2, .head_dim = head_dim,
                     .block_size = seed % 2 == 0 ? 16 : 4, .window = seed % 3 == 0 ? 9 : 0,
                     .q_scale = seed % 5 == 0 ? 6.0f : 1.0f, .seqs = random_batch(rng)};
        double diff = 0;
        run_case(gpu, c, seed++, &diff);
        if (HasFatalFailure()) return;
        // The kernel did run: f32 rows rounded to f16 cannot give the fp32 kernel's numbers everywhere.
        if (type == KvType::f32 && gpu.tensor_core_prefill(head_dim)) {
          EXPECT_GT(diff, 0.0) << "head_dim " << head_dim;
        }
      }
    }
    for (int32_t window : {0, 100}) {
      const Case c{.type = type, .n_head = 8, .n_head_kv = 2, .head_dim = 128, .block_size = 16, .window = window,
                   .q_scale = 3.0f, .seqs = {{700, 70}, {0, 300}, {1023, 1}, {5, 33}}};
      run_case(gpu, c, seed++);
      if (HasFatalFailure()) return;
    }
  }
}

// An encoder's bidirectional attention on the fp32 and tensor-core prefill
// kernels: every query sees every key of its sequence, across several
// 32-query tiles and partial key tiles, beside single-token sequences (the
// decode kernel, where causal and not agree), against the CPU kernel and the
// double reference.
TEST(CudaAttention, BidirectionalPrefillSeesTheWholeSequence) {
  TROUPE_REQUIRE_GPU();
  for (PrefillAttention prefill : {PrefillAttention::scalar, PrefillAttention::tensor_cores}) {
    CudaBackendOptions opt = test::small_options();
    opt.prefill_attention = prefill;
    CudaBackend gpu(opt);
    uint32_t seed = 900;
    for (KvType type : {KvType::f32, KvType::f16}) {
      for (int64_t head_dim : {32, 64}) {
        const Case c{.type = type,
                     .n_head = 12,
                     .n_head_kv = 12,
                     .head_dim = head_dim,
                     .block_size = 16,
                     .window = 0,
                     .q_scale = 2.0f,
                     .seqs = {{0, 7}, {0, 100}, {0, 1}, {0, 65}, {0, 512}},
                     .causal = false};
        run_case(gpu, c, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Gemma 3's images: queries of an open block see the whole block (their
// AttnSeq::key_end), with and without a sliding window, on the fp32 and
// tensor-core prefill kernels, beside decodes; one sequence continues a
// history that ends inside its block.
TEST(CudaAttention, OpenBlocksSeeTheirWholeBlockOnEveryKernel) {
  TROUPE_REQUIRE_GPU();
  for (PrefillAttention prefill : {PrefillAttention::scalar, PrefillAttention::tensor_cores}) {
    CudaBackendOptions opt = test::small_options();
    opt.prefill_attention = prefill;
    CudaBackend gpu(opt);
    uint32_t seed = 950;
    for (KvType type : {KvType::f32, KvType::f16, KvType::q8_0}) {
      for (int32_t window : {0, 40}) {
        const Case c{.type = type,
                     .n_head = 8,
                     .n_head_kv = 2,
                     .head_dim = 64,
                     .block_size = 16,
                     .window = window,
                     .q_scale = 2.0f,
                     .seqs = {{0, 300, {5, 261, 270, 286}}, {0, 1}, {20, 70, {17, 81}}, {90, 1}}};
        run_case(gpu, c, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Gemma 2's soft-capped scores through the decode kernel (split and not),
// the fp32 prefill kernel and the tensor-core one, with sharp rows the cap
// flattens, against the CPU kernel and the double reference.
TEST(CudaAttention, SoftCappedScoresOnEveryKernel) {
  TROUPE_REQUIRE_GPU();
  for (PrefillAttention prefill : {PrefillAttention::scalar, PrefillAttention::tensor_cores}) {
    CudaBackendOptions opt = test::small_options(true);
    opt.prefill_attention = prefill;
    CudaBackend gpu(opt);
    std::mt19937 rng(808);
    uint32_t seed = 800;
    for (KvType type : {KvType::f32, KvType::q8_0}) {
      for (int32_t window : {0, 9}) {
        const Case c{.type = type, .n_head = 8, .n_head_kv = 4, .head_dim = 128, .block_size = 16, .window = window,
                     .q_scale = 6.0f, .seqs = random_batch(rng), .softcap = 2.0f};
        run_case(gpu, c, seed++);
        if (HasFatalFailure()) return;
      }
    }
    const Case long_decode{.n_head = 4, .n_head_kv = 2, .head_dim = 64, .block_size = 32, .window = 0, .q_scale = 4.0f,
                           .seqs = {{4000, 1}, {300, 50}}, .softcap = 5.0f};
    run_case(gpu, long_decode, seed++);
    if (HasFatalFailure()) return;
  }
}

// gpt-oss's sinks through the decode kernel (split and not, where the
// reduce adds the sink), the fp32 prefill kernel and the tensor-core one.
TEST(CudaAttention, SinksOnEveryKernel) {
  TROUPE_REQUIRE_GPU();
  for (PrefillAttention prefill : {PrefillAttention::scalar, PrefillAttention::tensor_cores}) {
    CudaBackendOptions opt = test::small_options(true);
    opt.prefill_attention = prefill;
    CudaBackend gpu(opt);
    std::mt19937 rng(909);
    uint32_t seed = 900;
    for (KvType type : {KvType::f32, KvType::f16}) {
      for (int32_t window : {0, 9}) {
        const Case c{.type = type, .n_head = 8, .n_head_kv = 2, .head_dim = 64, .block_size = 16, .window = window,
                     .q_scale = 3.0f, .seqs = random_batch(rng), .sinks = true};
        run_case(gpu, c, seed++);
        if (HasFatalFailure()) return;
      }
    }
    const Case long_decode{.n_head = 4, .n_head_kv = 2, .head_dim = 64, .block_size = 32, .window = 128,
                           .q_scale = 4.0f, .seqs = {{4000, 1}, {300, 50}}, .sinks = true};
    run_case(gpu, long_decode, seed++);
    if (HasFatalFailure()) return;
  }
}

// Needs no GPU: the rule the planner and the backend both apply.
TEST(CudaAttention, Q8CacheNeedsWholeGroupsOf32) {
  EXPECT_NE(kv_type_refusal("cuda", KvType::q8_0, 8).find("cannot hold a q8_0 KV cache"), std::string::npos);
  EXPECT_FALSE(kv_type_refusal("cuda", KvType::q8_0, 8).empty());
  EXPECT_TRUE(kv_type_refusal("cuda", KvType::q8_0, 64).empty());
  EXPECT_TRUE(kv_type_refusal("cuda", KvType::f16, 8).empty());
  EXPECT_TRUE(kv_type_refusal("cpu", KvType::q8_0, 8).empty());
}

}  // namespace
}  // namespace troupe
