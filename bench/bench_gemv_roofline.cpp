// The decode GEMV against the memory roofline, with nothing else of a decode
// step: one token through a model's worth of repacked matrices (a Llama
// layer's q, k, v, o, gate, up and down, repeated), timed in turn with a
// plain read of as many bytes (bench/read_bandwidth.cpp). Each round runs
// both, so its ratio compares them on the same machine minute; the swings
// of a shared machine move both.
//
//   bench_gemv_roofline [--type q4_0|...|q2_K|...|bf16|f32] [--shape 1b|110m] [--layers N] [--threads 1]
//                       [--rounds 5] [--isa avx2|avx512]
//
// --layers N takes the first N layers only: a working set that stays in L2 or
// L3, where the GEMV's arithmetic, not DRAM, sets its rate.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/read_bandwidth.hpp"
#include "core/cpu_features.hpp"
#include "core/dtype.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/bf16_packed.hpp"
#include "kernels/cpu/f32_packed.hpp"
#include "kernels/cpu/int8_packed.hpp"
#include "kernels/cpu_backend.hpp"
#include "memory/weight_slabs.hpp"

namespace {

struct Shape {
  int64_t dim, kv_dim, ffn_dim, n_layers;
};

// A repacked matrix, placed where the CPU backend places it
// (packed_weight_memory).
struct Matrix {
  int64_t n_in, n_out;
  std::shared_ptr<uint8_t> packed;
};

// Bytes of W [n_out, n_in] of type t as its kernels read it.
int64_t packed_bytes(troupe::DType t, int64_t n_in, int64_t n_out) {
  if (t == troupe::DType::f32) return troupe::kernels::f32_packed_bytes(n_in, n_out);
  return t == troupe::DType::bf16 ? troupe::kernels::bf16_packed_bytes(n_in, n_out)
                                  : troupe::kernels::int8_packed_bytes(t, n_in, n_out);
}

// W [n_out, n_in] of type t from 64 distinct random rows (the GEMV's time
// does not depend on the values), repacked.
Matrix make_matrix(troupe::DType t, int64_t n_in, int64_t n_out, std::mt19937& rng, troupe::ThreadPool& pool,
                   troupe::WeightSlabs& slabs) {
  constexpr int64_t kDistinct = 64;
  const int64_t rb = troupe::row_bytes(t, n_in);
  std::vector<uint8_t> rows(static_cast<size_t>(kDistinct * rb));
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> f(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < kDistinct; ++r) {
    for (float& v : f) v = normal(rng);
    troupe::quantize_row(t, f.data(), rows.data() + r * rb, n_in);
  }
  std::vector<uint8_t> w(static_cast<size_t>(n_out * rb));
  for (int64_t r = 0; r < n_out; ++r) {
    std::copy_n(rows.data() + (r % kDistinct) * rb, rb, w.data() + r * rb);
  }
  Matrix m{.n_in = n_in, .n_out = n_out};
  const auto bytes = static_cast<size_t>(packed_bytes(t, n_in, n_out));
  m.packed.reset(static_cast<uint8_t*>(troupe::packed_weight_memory(slabs, bytes)),
                 [&slabs](uint8_t* p) { troupe::release_weight_memory(slabs, p); });
  if (t == troupe::DType::f32) {
    troupe::kernels::pack_f32(m.packed.get(), reinterpret_cast<const float*>(w.data()), n_in, n_out, pool);
  } else if (t == troupe::DType::bf16) {
    troupe::kernels::pack_bf16(m.packed.get(), w.data(), t, n_in, n_out, pool);
  } else {
    troupe::kernels::pack_int8(m.packed.get(), w.data(), t, n_in, n_out, pool);
    // Counted as a CPU backend counts what it repacks: the GEMV's prefetch
    // distance follows whether the weights fit in L3 (packed_groups.hpp).
    troupe::kernels::count_int8_packed_bytes(static_cast<int64_t>(bytes));
  }
  return m;
}

std::optional<troupe::DType> int8_type(const std::string& name) {
  using troupe::DType;
  for (DType t : {DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1, DType::q8_0, DType::q2_K, DType::q3_K,
                  DType::q4_K, DType::q5_K, DType::q6_K, DType::iq4_nl, DType::iq4_xs, DType::mxfp4, DType::bf16,
                  DType::f32}) {
    if (troupe::dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

int usage() {
  std::fprintf(stderr, "usage: bench_gemv_roofline [--type q4_0|q4_1|q5_0|q5_1|q8_0|q2_K|q3_K|q4_K|q5_K|q6_K|"
                       "iq4_nl|iq4_xs|mxfp4|bf16|f32] "
                       "[--shape 1b|110m] [--layers N] [--threads N] [--rounds N] [--isa avx2|avx512]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string type = "q4_0", shape_name = "1b";
  int threads = 1, rounds = 5, layers = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--type" && i + 1 < argc) {
      type = argv[++i];
    } else if (a == "--shape" && i + 1 < argc) {
      shape_name = argv[++i];
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--layers" && i + 1 < argc) {
      layers = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--isa" && i + 1 < argc) {  // the kernels of a forced SIMD path (and its layouts)
      const auto isa = troupe::parse_isa(argv[++i]);
      if (!isa || *isa == troupe::Isa::scalar || !troupe::isa_supported(*isa)) return usage();
      troupe::force_isa(*isa);
    } else {
      return usage();
    }
  }
  const auto t = int8_type(type);
  if (!t) return usage();
  if (shape_name != "1b" && shape_name != "110m") return usage();
  // Llama 3.2 1B and the 110M llama2.c model, without embeddings and head.
  Shape shape = shape_name == "1b" ? Shape{2048, 512, 8192, 16} : Shape{768, 768, 2048, 12};
  if (layers > 0) shape.n_layers = layers;
  const bool available = *t == troupe::DType::f32    ? troupe::kernels::f32_packing_available()
                         : *t == troupe::DType::bf16 ? troupe::kernels::bf16_packing_available(*t)
                                                     : troupe::kernels::int8_packing_available(*t);
  if (!available) {
    std::printf("skipped: this CPU has no packed path for %s (AVX-512, VNNI or BF16)\n", type.c_str());
    return 0;
  }
  troupe::ThreadPool pool(threads);
  std::mt19937 rng(1);
  troupe::WeightSlabs slabs;  // outlives ms, whose matrices it holds
  std::vector<Matrix> ms;
  size_t total = 0;
  for (int64_t l = 0; l < shape.n_layers; ++l) {
    const int64_t d = shape.dim, kv = shape.kv_dim, ffn = shape.ffn_dim;
    for (auto [n_out, n_in] : {std::pair{d, d}, {kv, d}, {kv, d}, {d, d}, {ffn, d}, {ffn, d}, {d, ffn}}) {
      ms.push_back(make_matrix(*t, n_in, n_out, rng, pool, slabs));
      total += static_cast<size_t>(packed_bytes(*t, n_in, n_out));
    }
  }
  std::vector<float> x(static_cast<size_t>(shape.ffn_dim), 0.5f), y(static_cast<size_t>(shape.ffn_dim));
  auto pass = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    for (const Matrix& m : ms) {
      if (*t == troupe::DType::f32) {
        troupe::kernels::matmul_f32_packed(y.data(), x.data(), m.packed.get(), 1, m.n_in, m.n_out, pool);
      } else if (*t == troupe::DType::bf16) {
        troupe::kernels::matmul_bf16_packed(y.data(), x.data(), m.packed.get(), 1, m.n_in, m.n_out, pool);
      } else {
        troupe::kernels::matmul_int8_packed(y.data(), x.data(), m.packed.get(), *t, 1, m.n_in, m.n_out, pool);
      }
    }
    return static_cast<double>(total) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
           1e9;
  };
  pass();  // touches every page once
  std::printf("%s, %s shapes, %.0f MB packed, %d thread(s)\n\n| round | GEMV GB/s | read GB/s | GEMV / read |\n"
              "|---|---|---|---|\n",
              type.c_str(), shape_name.c_str(), static_cast<double>(total) / 1e6, threads);
  std::vector<double> ratios;
  for (int r = 0; r < rounds; ++r) {
    double gemv = 0;
    for (int k = 0; k < 3; ++k) gemv = std::max(gemv, pass());
    const double read = troupe::bench::read_bandwidth_gbs(total, threads);
    ratios.push_back(gemv / read);
    std::printf("| %d | %.1f | %.1f | %.2f |\n", r + 1, gemv, read, ratios.back());
    std::fflush(stdout);
  }
  std::sort(ratios.begin(), ratios.end());
  std::printf("\nGEMV / read: median %.2f, range %.2f-%.2f\n", ratios[ratios.size() / 2], ratios.front(),
              ratios.back());
  return 0;
}
