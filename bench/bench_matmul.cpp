// Times kernels::matmul for the shapes of a 110M Llama (stories110M: n_embd
// 768, FFN 2048, n_vocab 32000), decode (1 token) and prefill (512 tokens),
// for every weight dtype on 1 and 2 threads. Reports GFLOP/s and GB/s of
// weight traffic, and (model110m/...) the tokens per second of all of a
// forward pass's matmuls. `--isa=scalar|avx2|avx512` forces a SIMD path;
// `--exact-math` keeps f32 activations for quantized weights (no int8 path);
// `--no-amx` keeps the GEMMs off AMX where the CPU has it;
// `--dots256=pairs|avx_vnni|avx512_vnni` picks the integer dot products of
// the 256-bit int8 kernels (core/cpu_features.hpp); `--packed` times
// the matmul benchmarks on weights repacked for the int8 path
// (kernels/cpu/int8_packed.hpp) or, for f16/bf16, the bf16 path
// (kernels/cpu/bf16_packed.hpp), as the CPU backend runs them.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/dtype.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/bf16_packed.hpp"
#include "kernels/cpu/int8_packed.hpp"
#include "kernels/cpu/matmul_int8.hpp"
#include "kernels/cpu_kernels.hpp"

namespace {

using troupe::DType;

bool g_packed = false;

struct Shape {
  int64_t n_out;
  int64_t n_in;
};

uint8_t* aligned(uint8_t* p) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 63) / 64 * 64);
}

// Random weights quantized once per (dtype, shape) and shared by benchmarks.
const std::vector<uint8_t>& weights(DType t, Shape s) {
  static std::map<std::tuple<DType, int64_t, int64_t>, std::vector<uint8_t>> cache;
  auto& w = cache[{t, s.n_out, s.n_in}];
  if (w.empty()) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> row(static_cast<size_t>(s.n_in));
    const int64_t rb = troupe::row_bytes(t, s.n_in);
    w.resize(static_cast<size_t>(s.n_out * rb));
    for (int64_t r = 0; r < s.n_out; ++r) {
      for (float& v : row) v = dist(rng);
      troupe::quantize_row(t, row.data(), w.data() + r * rb, s.n_in);
    }
  }
  return w;
}

bool int8_packed(DType t) { return !troupe::exact_math() && troupe::kernels::int8_packing_available(t); }
bool bf16_packed(DType t) { return !troupe::exact_math() && troupe::kernels::bf16_packing_available(t); }

// W repacked for the int8 or bf16 path (empty when this CPU has neither).
const std::vector<uint8_t>& packed_weights(DType t, Shape s) {
  static std::map<std::tuple<DType, int64_t, int64_t>, std::vector<uint8_t>> cache;
  auto& p = cache[{t, s.n_out, s.n_in}];
  troupe::ThreadPool tp(1);
  // +64: the packers want 64-byte alignment; the vector's data is aligned up.
  if (p.empty() && int8_packed(t)) {
    p.resize(static_cast<size_t>(troupe::kernels::int8_packed_bytes(t, s.n_in, s.n_out) + 64));
    troupe::kernels::pack_int8(aligned(p.data()), weights(t, s).data(), t, s.n_in, s.n_out, tp);
  } else if (p.empty() && bf16_packed(t)) {
    p.resize(static_cast<size_t>(troupe::kernels::bf16_packed_bytes(s.n_in, s.n_out) + 64));
    troupe::kernels::pack_bf16(aligned(p.data()), weights(t, s).data(), t, s.n_in, s.n_out, tp);
  }
  return p;
}

troupe::ThreadPool& pool(int n_threads) {
  static std::map<int, std::unique_ptr<troupe::ThreadPool>> pools;
  auto& p = pools[n_threads];
  if (!p) p = std::make_unique<troupe::ThreadPool>(n_threads);
  return *p;
}

void bm_matmul(benchmark::State& state, DType t, Shape s, int64_t n_tokens, int n_threads) {
  const std::vector<uint8_t>& w = weights(t, s);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * s.n_in));
  for (float& v : x) v = dist(rng);
  std::vector<float> y(static_cast<size_t>(n_tokens * s.n_out));
  troupe::ThreadPool& tp = pool(n_threads);
  const bool packed = g_packed && (int8_packed(t) || bf16_packed(t));
  const uint8_t* pw = packed ? aligned(const_cast<uint8_t*>(packed_weights(t, s).data())) : nullptr;
  for (auto _ : state) {
    if (packed && int8_packed(t)) {
      troupe::kernels::matmul_int8_packed(y.data(), x.data(), pw, t, n_tokens, s.n_in, s.n_out, tp);
    } else if (packed) {
      troupe::kernels::matmul_bf16_packed(y.data(), x.data(), pw, n_tokens, s.n_in, s.n_out, tp);
    } else {
      troupe::kernels::matmul(y.data(), x.data(), w.data(), t, n_tokens, s.n_in, s.n_out, tp);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(n_tokens * s.n_in * s.n_out);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(w.size()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Every matmul of one forward pass of stories110M (12 layers: q, k, v, o
// 768x768; gate, up 2048x768; down 768x2048; logits 32000x768 for the last
// token only, as llama.cpp's pp/tg tests do), each layer with its own weights
// so that nothing stays in the 32 MiB L3: the matmul share of decode (tokens
// 1) and prefill (tokens 512) speed, in tokens per second.
void bm_model110m(benchmark::State& state, DType t, int64_t n_tokens, int n_threads) {
  constexpr int64_t kEmbd = 768, kFfn = 2048, kVocab = 32000;
  constexpr int kLayers = 12;
  const Shape layer[] = {{kEmbd, kEmbd}, {kEmbd, kEmbd}, {kEmbd, kEmbd}, {kEmbd, kEmbd},
                         {kFfn, kEmbd},  {kFfn, kEmbd},  {kEmbd, kFfn}};
  // One random matrix per shape, copied per layer: distinct memory, cheap setup.
  std::vector<std::pair<Shape, std::vector<uint8_t>>> mats;
  for (int l = 0; l < kLayers; ++l) {
    for (Shape s : layer) mats.emplace_back(s, weights(t, s));
  }
  const std::vector<uint8_t>& out = weights(t, {kVocab, kEmbd});
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * kFfn));
  for (float& v : x) v = dist(rng);
  std::vector<float> y(static_cast<size_t>(n_tokens * kVocab));
  troupe::ThreadPool& tp = pool(n_threads);
  for (auto _ : state) {
    for (const auto& [s, w] : mats) {
      troupe::kernels::matmul(y.data(), x.data(), w.data(), t, n_tokens, s.n_in, s.n_out, tp);
    }
    troupe::kernels::matmul(y.data(), x.data(), out.data(), t, 1, kEmbd, kVocab, tp);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(n_tokens), benchmark::Counter::kIsIterationInvariantRate);
}

// The int8 path's activation quantization alone (AVX-512 VNNI), as a
// prefill's matmul runs it before its tiles: tokens x n_in to int8 blocks,
// their sums per sub-block of sub_k and the tiled copy. GB/s of f32 read.
void bm_quantize_acts(benchmark::State& state, int64_t n_in, int64_t sub_k, int64_t n_tokens, int n_threads) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
  for (float& v : x) v = dist(rng);
  troupe::ThreadPool& tp = pool(n_threads);
  for (auto _ : state) {
    const auto qa = troupe::kernels::detail::quantize_acts(x.data(), n_tokens, n_in, false, 8, sub_k, &tp);
    benchmark::DoNotOptimize(qa.q);
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(x.size() * sizeof(float)) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  // Our own flag first; the rest go to Google Benchmark.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--isa=", 6) == 0) {
      const auto isa = troupe::parse_isa(argv[i] + 6);
      if (!isa) {
        std::fprintf(stderr, "--isa: scalar, avx2 or avx512\n");
        return 2;
      }
      troupe::force_isa(*isa);
    } else if (std::strncmp(argv[i], "--dots256=", 10) == 0) {
      const auto d = troupe::parse_dots256(argv[i] + 10);
      if (!d) {
        std::fprintf(stderr, "--dots256: pairs, avx_vnni or avx512_vnni\n");
        return 2;
      }
      troupe::force_dots256(*d);
    } else if (std::strcmp(argv[i], "--exact-math") == 0) {
      troupe::set_exact_math(true);
    } else if (std::strcmp(argv[i], "--packed") == 0) {
      g_packed = true;
    } else if (std::strcmp(argv[i], "--no-amx") == 0) {
      troupe::set_amx_enabled(false);
    } else {
      args.push_back(argv[i]);
    }
  }
  int n_args = static_cast<int>(args.size());

  const DType types[] = {DType::f32,  DType::f16,  DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0,
                         DType::q5_1, DType::q2_K, DType::q3_K, DType::q4_K, DType::q5_K, DType::q6_K,
                         DType::iq4_nl, DType::iq4_xs, DType::mxfp4};
  const Shape shapes[] = {{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}};
  for (int64_t n_tokens : {1, 512}) {
    for (DType t : types) {
      for (Shape s : shapes) {
        for (int n_threads : {1, 2}) {
          const std::string name = "matmul/" + std::string(troupe::dtype_name(t)) + "/tokens:" +
                                   std::to_string(n_tokens) + "/" + std::to_string(s.n_out) + "x" +
                                   std::to_string(s.n_in) + "/threads:" + std::to_string(n_threads);
          benchmark::RegisterBenchmark(name.c_str(), bm_matmul, t, s, n_tokens, n_threads)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
      }
    }
  }
  for (int64_t n_tokens : {1, 512}) {
    for (DType t : types) {
      for (int n_threads : {1, 2}) {
        const std::string name = "model110m/" + std::string(troupe::dtype_name(t)) + "/tokens:" +
                                 std::to_string(n_tokens) + "/threads:" + std::to_string(n_threads);
        benchmark::RegisterBenchmark(name.c_str(), bm_model110m, t, n_tokens, n_threads)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
      }
    }
  }
  if (troupe::active_isa() == troupe::Isa::avx512 && troupe::cpu_has_avx512_vnni()) {
    for (int64_t n_in : {768, 2048}) {
      for (int64_t sub_k : {32, 16}) {
        for (int n_threads : {1, 2}) {
          const std::string name = "quantize_acts/tokens:512/n_in:" + std::to_string(n_in) +
                                   "/sub_k:" + std::to_string(sub_k) + "/threads:" + std::to_string(n_threads);
          benchmark::RegisterBenchmark(name.c_str(), bm_quantize_acts, n_in, sub_k, 512, n_threads)
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
      }
    }
  }
  std::printf("isa: %s\n", std::string(troupe::isa_name(troupe::active_isa())).c_str());
  benchmark::Initialize(&n_args, args.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
