// Row quantizers alone (core's quantize_row, what `--quantize` and
// troupe-make-model run), one thread: ns a weight for each type on
// Normal(0, 0.02) rows of a 1B model's width, the relative RMS error of the
// round trip, and the time as a multiple of q8_0's (the plain absmax
// rounder, measured in the same run). docs/performance.md has the figures.
//   bench_quantize [--n 2048] [--rows 512] [--repeat 3]
// With --source F16.gguf --versus QUANT.gguf (a file another quantizer made
// from the same weights, llama.cpp's llama-quantize say): for every
// quantized tensor of QUANT, the relative RMS error of its values and of
// Troupe's quantizer on the source's rows, to the same type, by type.
//   bench_quantize --source 1b-f16.gguf --versus 1b-q4_k_m.gguf [--rows 256]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "model/gguf.hpp"

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

// Sums of squares over the sampled rows of one type's tensors.
struct ErrorSums {
  double theirs = 0, ours = 0, ref = 0;
  int64_t weights = 0;
  int tensors = 0;
};

// Every tensor of `versus` whose type is quantized, against the same tensor
// of `source`: up to max_rows rows of each, spread over the tensor.
int compare_files(const std::string& source, const std::string& versus, int64_t max_rows) {
  namespace gguf = troupe::gguf;
  const auto src = gguf::GgufFile::open(source);
  const auto other = gguf::GgufFile::open(versus);
  std::vector<std::pair<DType, ErrorSums>> by_type;
  for (const gguf::TensorInfo& t : other.tensors()) {
    if (!troupe::is_quantized(t.type)) continue;
    const gguf::TensorInfo* s = src.find_tensor(t.name);
    if (s == nullptr || s->shape != t.shape) {
      std::fprintf(stderr, "bench_quantize: %s: no tensor of that shape in %s\n", t.name.c_str(), source.c_str());
      return 1;
    }
    const int64_t n = t.shape[0], rows = t.n_elements() / n;
    const int64_t step = std::max<int64_t>(1, rows / max_rows);
    std::vector<float> x(static_cast<size_t>(n)), theirs(x.size()), ours(x.size());
    std::vector<uint8_t> q(static_cast<size_t>(troupe::row_bytes(t.type, n)));
    auto it = std::find_if(by_type.begin(), by_type.end(), [&](const auto& e) { return e.first == t.type; });
    if (it == by_type.end()) it = by_type.insert(by_type.end(), {t.type, ErrorSums{}});
    ErrorSums& e = it->second;
    ++e.tensors;
    for (int64_t r = 0; r < rows; r += step) {
      troupe::dequantize_row(s->type, static_cast<const uint8_t*>(s->data) + r * troupe::row_bytes(s->type, n),
                             x.data(), n);
      troupe::dequantize_row(t.type, static_cast<const uint8_t*>(t.data) + r * troupe::row_bytes(t.type, n),
                             theirs.data(), n);
      troupe::quantize_row(t.type, x.data(), q.data(), n);
      troupe::dequantize_row(t.type, q.data(), ours.data(), n);
      for (int64_t j = 0; j < n; ++j) {
        e.theirs += (double(theirs[j]) - x[j]) * (double(theirs[j]) - x[j]);
        e.ours += (double(ours[j]) - x[j]) * (double(ours[j]) - x[j]);
        e.ref += double(x[j]) * x[j];
      }
      e.weights += n;
    }
  }
  std::printf("%s against Troupe's quantizer on %s, up to %lld rows a tensor\n", versus.c_str(), source.c_str(),
              static_cast<long long>(max_rows));
  std::printf("| type | tensors | weights sampled | rel. RMS error, theirs | Troupe's | Troupe / theirs |\n"
              "|---|---|---|---|---|---|\n");
  for (const auto& [type, e] : by_type) {
    const double theirs = std::sqrt(e.theirs / e.ref), ours = std::sqrt(e.ours / e.ref);
    std::printf("| %s | %d | %lld | %.5f | %.5f | %.3f |\n", std::string(troupe::dtype_name(type)).c_str(), e.tensors,
                static_cast<long long>(e.weights), theirs, ours, ours / theirs);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 2048, rows = 512;
  int repeat = 3;
  std::string source, versus;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--n")) n = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--source")) source = argv[i + 1];
    else if (!std::strcmp(argv[i], "--versus")) versus = argv[i + 1];
    else if (!std::strcmp(argv[i], "--rows")) rows = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_quantize [--n 2048] [--rows 512] [--repeat 3] "
                           "[--source F16.gguf --versus QUANT.gguf]\n");
      return 2;
    }
  }
  if (!source.empty() || !versus.empty()) {
    if (source.empty() || versus.empty() || rows <= 0) {
      std::fprintf(stderr, "bench_quantize: --source and --versus go together, --rows positive\n");
      return 2;
    }
    try {
      return compare_files(source, versus, rows);
    } catch (const troupe::Error& e) {
      std::fprintf(stderr, "bench_quantize: %s\n", e.what());
      return 1;
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
                  DType::q6_K, DType::iq4_nl, DType::iq4_xs, DType::mxfp4}) {
    const Result r = t == DType::q8_0 ? base : measure(t, x, n, rows, repeat);
    std::printf("| %s | %.1f | %.1f | %.4f |\n", std::string(troupe::dtype_name(t)).c_str(), r.ns_per_weight,
                r.ns_per_weight / base.ns_per_weight, r.rel_rms_error);
  }
  return 0;
}
