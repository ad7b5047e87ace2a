// Row quantizers alone (core's quantize_row, what `--quantize` and
// troupe-make-model run), one thread: ns a weight for each type on
// Normal(0, 0.02) rows of a 1B model's width, the relative RMS error of the
// round trip, and the time as a multiple of q8_0's (the plain absmax
// rounder, measured in the same run). docs/performance.md has the figures.
//   bench_quantize [--n 2048] [--rows 512] [--repeat 3]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace {

using troupe::DType;

struct Result {
  double ns_per_weight;
  double rel_rms_error;
};

Result measure(DType t, const std::vector<float>& x, int64_t n, int64_t rows, int repeat) {
  const int64_t rb = troupe::row_bytes(t, n);
  std::vector<uint8_t> out(static_cast<size_t>(rb * rows));
  double best = 1e30;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < rows; ++i) troupe::quantize_row(t, x.data() + i * n, out.data() + i * rb, n);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::vector<float> y(static_cast<size_t>(n));
  double err = 0, ref = 0;
  for (int64_t i = 0; i < rows; ++i) {
    troupe::dequantize_row(t, out.data() + i * rb, y.data(), n);
    for (int64_t j = 0; j < n; ++j) {
      const double d = double(y[j]) - x[i * n + j];
      err += d * d;
      ref += double(x[i * n + j]) * x[i * n + j];
    }
  }
  return {best * 1e9 / static_cast<double>(n * rows), std::sqrt(err / ref)};
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 2048, rows = 512;
  int repeat = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--n")) n = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rows")) rows = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_quantize [--n 2048] [--rows 512] [--repeat 3]\n");
      return 2;
    }
  }
  if (n <= 0 || n % 256 != 0 || rows <= 0 || repeat <= 0) {
    std::fprintf(stderr, "bench_quantize: --n must be a positive multiple of 256, --rows and --repeat positive\n");
    return 2;
  }
  std::vector<float> x(static_cast<size_t>(n * rows));
  std::mt19937 gen(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (float& v : x) v = normal(gen);

  const Result base = measure(DType::q8_0, x, n, rows, repeat);
  std::printf("%d x %d weights, one thread, best of %d\n", static_cast<int>(rows), static_cast<int>(n), repeat);
  std::printf("| type | ns/weight | x q8_0 | rel. RMS error |\n|---|---|---|---|\n");
  for (DType t : {DType::q8_0, DType::q4_0, DType::q5_0, DType::q2_K, DType::q3_K, DType::q4_K, DType::q5_K,
                  DType::q6_K, DType::iq4_nl, DType::iq4_xs}) {
    const Result r = t == DType::q8_0 ? base : measure(t, x, n, rows, repeat);
    std::printf("| %s | %.1f | %.1f | %.4f |\n", std::string(troupe::dtype_name(t)).c_str(), r.ns_per_weight,
                r.ns_per_weight / base.ns_per_weight, r.rel_rms_error);
  }
  return 0;
}
