// Causal prefill attention alone (kernels::attention over a paged cache
// kv_write filled), for the head layouts of the bench models: 110M (12 query
// heads on 12 kv heads) and 1.24B (32 on 8), head_dim 64. Reports ms per
// call and GFLOP/s, counting QK^T and PV over the n(n+1)/2 visible pairs of
// each head: 4 * head_dim * n_head * n(n+1)/2 FLOPs. Compare the figure with
// the core's f32 FMA peak (docs/performance.md) to see how far it is.
//   bench_attention [--tokens 512,2048] [--threads 1,2] [--types f32,f16,q8_0]
//                   [--layout 110m,1b,vit] [--repeat 5] [--isa avx2|avx512|scalar]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_args.hpp"
#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu_kernels.hpp"
#include "memory/kv_type.hpp"
#include "memory/paged_kv.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using troupe::KvType;

struct Layout {
  std::string name;
  int64_t n_head;
  int64_t n_head_kv;
  int64_t head_dim;
};

// The bench models' heads, and "vit": a SigLIP-so400m tower's (Gemma 3's, 16
// of head_dim 72), here under a causal mask.
const Layout kLayouts[] = {{"110m", 12, 12, 64}, {"1b", 32, 8, 64}, {"vit", 16, 16, 72}};

struct Args {
  std::vector<int64_t> tokens = {512, 2048};
  std::vector<int> threads = {1, 2};
  std::vector<KvType> types = {KvType::f32, KvType::f16, KvType::q8_0};
  std::vector<Layout> layouts = {kLayouts[0], kLayouts[1]};
  int repeat = 5;
};

Args parse(int argc, char** argv) {
  Args a;
  troupe::bench::for_each_flag(argc, argv, [&](const std::string& flag, const std::string& v) {
    if (flag == "--tokens") {
      a.tokens.clear();
      for (const auto& t : troupe::bench::split_list(v)) a.tokens.push_back(std::stoll(t));
    } else if (flag == "--threads") {
      a.threads.clear();
      for (const auto& t : troupe::bench::split_list(v)) a.threads.push_back(std::stoi(t));
    } else if (flag == "--types") {
      a.types.clear();
      for (const auto& t : troupe::bench::split_list(v)) a.types.push_back(troupe::parse_kv_type(t));
    } else if (flag == "--layout") {
      a.layouts.clear();
      for (const auto& t : troupe::bench::split_list(v)) {
        auto it = std::find_if(std::begin(kLayouts), std::end(kLayouts), [&](const Layout& l) { return l.name == t; });
        if (it == std::end(kLayouts)) throw troupe::Error(troupe::Errc::invalid_argument, "unknown layout " + t);
        a.layouts.push_back(*it);
      }
    } else if (flag == "--repeat") {
      a.repeat = std::stoi(v);
    } else if (flag == "--isa") {  // a SIMD path forced, as bench_generate's
      const auto isa = troupe::parse_isa(v);
      if (!isa || !troupe::isa_supported(*isa)) {
        throw troupe::Error(troupe::Errc::invalid_argument, "--isa " + v + ": unknown or not on this CPU");
      }
      troupe::force_isa(*isa);
    } else {
      throw troupe::Error(troupe::Errc::invalid_argument, "unknown flag " + flag);
    }
  });
  return a;
}

// Median ms of `repeat` prefill calls of n tokens on one sequence.
double time_prefill(const Layout& l, KvType type, int64_t n, int threads, int repeat) {
  constexpr int64_t kBlock = 16;
  troupe::PagedKvView kv{.n_blocks = (n + kBlock - 1) / kBlock,
                         .block_size = kBlock,
                         .n_head_kv = l.n_head_kv,
                         .head_dim = l.head_dim,
                         .type = type};
  std::vector<unsigned char> kc(static_cast<size_t>(kv.n_blocks * kv.block_bytes()));
  std::vector<unsigned char> vc(kc.size());
  kv.k = kc.data();
  kv.v = vc.data();
  std::vector<int32_t> table(static_cast<size_t>(kv.n_blocks));
  for (size_t b = 0; b < table.size(); ++b) table[b] = static_cast<int32_t>(b);

  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  auto random = [&](int64_t count) {
    std::vector<float> x(static_cast<size_t>(count));
    for (float& f : x) f = dist(rng);
    return x;
  };
  const auto k = random(n * l.n_head_kv * l.head_dim);
  const auto v = random(n * l.n_head_kv * l.head_dim);
  const auto q = random(n * l.n_head * l.head_dim);
  std::vector<float> out(q.size());
  const troupe::AttnSeq seq{.q_begin = 0, .n_q = static_cast<int32_t>(n), .n_past = 0, .block_table = table.data()};
  troupe::kernels::kv_write(kv, k.data(), v.data(), &seq, 1);

  troupe::ThreadPool pool(threads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(l.head_dim));
  std::vector<double> ms;
  for (int r = 0; r < repeat + 1; ++r) {  // the first call warms caches and is dropped
    const auto t0 = Clock::now();
    troupe::kernels::attention(out.data(), q.data(), kv, &seq, 1, l.n_head, scale, pool);
    const double dt = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (r > 0) ms.push_back(dt);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    std::printf("| layout | kv type | tokens | threads | ms | GFLOP/s |\n|---|---|---|---|---|---|\n");
    for (const Layout& l : a.layouts) {
      for (KvType t : a.types) {
        for (int64_t n : a.tokens) {
          for (int th : a.threads) {
            const double ms = time_prefill(l, t, n, th, a.repeat);
            const double flops = 4.0 * static_cast<double>(l.head_dim * l.n_head) * static_cast<double>(n) *
                                 static_cast<double>(n + 1) / 2.0;
            std::printf("| %s | %s | %lld | %d | %.2f | %.1f |\n", l.name.c_str(), troupe::kv_type_name(t),
                        static_cast<long long>(n), th, ms, flops / ms / 1e6);
          }
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_attention: %s\n", e.what());
    return 1;
  }
  return 0;
}
