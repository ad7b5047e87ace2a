// One image through a vision-language model's tower and projector
// (VisionEncoder::encode on the CPU), for each element type of the tower's
// keys and values: ms per image and GFLOP/s over the tower's matmuls and
// attention. Pixels are fixed pseudo-random values of the processor's size
// (decoding and resizing are not timed). The types alternate, so a machine
// whose speed wanders moves them alike.
//   bench_vision --model DIR | --model TEXT.gguf --mmproj FILE
//                [--threads 2] [--repeat 3] [--kv default,f32,f16,bf16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_args.hpp"
#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "memory/kv_type.hpp"
#include "model/model.hpp"
#include "vision/vision_encoder.hpp"
#include "vision/vision_model.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using troupe::KvType;

struct Args {
  std::string model;
  std::string mmproj;
  int threads = 2;
  int repeat = 3;
  std::vector<std::string> kv = {"default", "f32", "f16"};
};

Args parse(int argc, char** argv) {
  Args a;
  troupe::bench::for_each_flag(argc, argv, [&](const std::string& flag, const std::string& value) {
    if (flag == "--model") {
      a.model = value;
    } else if (flag == "--mmproj") {
      a.mmproj = value;
    } else if (flag == "--threads") {
      a.threads = std::stoi(value);
    } else if (flag == "--repeat") {
      a.repeat = std::stoi(value);
    } else if (flag == "--kv") {
      a.kv = troupe::bench::split_list(value);
    } else {
      throw troupe::Error(troupe::Errc::invalid_argument, "unknown flag " + flag);
    }
  });
  if (a.model.empty()) throw troupe::Error(troupe::Errc::invalid_argument, "--model is required");
  return a;
}

// Matmul and attention FLOPs of one image through the tower: per layer the
// four projections and the MLP over every position, QK^T and PV over every
// pair of positions.
double tower_flops(const troupe::vision::VisionConfig& v) {
  const auto n = static_cast<double>(v.n_positions());
  const auto h = static_cast<double>(v.hidden);
  const double per_layer = 2.0 * n * (4.0 * h * h + 2.0 * h * static_cast<double>(v.n_ff)) + 4.0 * n * n * h;
  return per_layer * static_cast<double>(v.n_run);
}

}  // namespace

int main(int argc, char** argv) try {
  const Args a = parse(argc, argv);
  std::shared_ptr<const troupe::vision::VisionModel> model;
  if (a.mmproj.empty()) {
    model = troupe::vision::VisionModel::load(a.model);
  } else {
    model = troupe::vision::VisionModel::load_mmproj(a.mmproj, troupe::Model::load(a.model)->vocab());
  }
  if (!model) throw troupe::Error(troupe::Errc::invalid_argument, a.model + " has no vision tower Troupe runs");
  const troupe::vision::VisionConfig& v = model->config();
  troupe::CpuBackend backend({.n_threads = a.threads});

  std::vector<float> pixels(static_cast<size_t>(3 * v.image_size * v.image_size));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& p : pixels) p = dist(rng);
  std::vector<float> out(static_cast<size_t>(v.image_tokens() * v.text_embd));

  struct Run {
    std::string label;
    std::unique_ptr<troupe::vision::VisionEncoder> encoder;
    std::vector<double> ms;
  };
  std::vector<Run> runs;
  for (const std::string& kv : a.kv) {
    std::optional<KvType> type;
    if (kv != "default") type = troupe::parse_kv_type(kv);
    auto encoder = std::make_unique<troupe::vision::VisionEncoder>(model, backend, type);
    const std::string label = kv + " (" + troupe::kv_type_name(encoder->kv_type()) + ")";
    encoder->encode(pixels, out.data());  // warm-up: pages touched, weights packed
    runs.push_back({label, std::move(encoder), {}});
  }
  for (int r = 0; r < a.repeat; ++r) {
    for (Run& run : runs) {
      const auto t0 = Clock::now();
      run.encoder->encode(pixels, out.data());
      run.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  }
  std::printf("%lld positions, %lld layers of %lld, %d threads, %d rounds\n\n", static_cast<long long>(v.n_positions()),
              static_cast<long long>(v.n_run), static_cast<long long>(v.hidden), a.threads, a.repeat);
  std::printf("| keys and values | ms per image (median) | range | tower GFLOP/s |\n|---|---|---|---|\n");
  for (Run& run : runs) {
    std::vector<double> ms = run.ms;
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    std::printf("| %s | %.0f | %.0f-%.0f | %.1f |\n", run.label.c_str(), med, ms.front(), ms.back(),
                tower_flops(v) / med / 1e6);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_vision: %s\n", e.what());
  return 1;
}
