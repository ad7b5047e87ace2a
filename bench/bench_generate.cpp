// Prefill and decode tokens/s of GGUF models on the CPU, next to the
// machine's read bandwidth over a buffer the size of the weights (L3's rate
// for a model that fits there, DRAM's for a larger one), so each decode
// figure is also a fraction of its roofline (bandwidth / weight bytes).
//   bench_generate [--threads 1,2] [--prefill 512] [--decode 32] [--repeat 3]
//                  [--exact-math] [--batch-invariant] [--no-amx] [--isa avx2]
//                  [--f32-matmul-precision highest|high|medium]
//                  [--dots256 pairs|avx_vnni|avx512_vnni] [--cpu-affinity 0,1]
//                  [--lora adapter.gguf] [--kv-type f32|f16|bf16|q8_0] model.gguf...
// --repeat runs each cell that many times and reports the median (this kind
// of shared machine is noisy); --exact-math, --batch-invariant and --no-amx
// turn off the fast paths, their AMX bf16 prefill, and AMX, for ratios
// within one run; --isa avx2 runs the kernels a CPU without AVX-512 gets,
// and --dots256 their integer dot products (core/cpu_features.hpp);
// --f32-matmul-precision high or medium puts f32 weights' prefill on AMX.
// --lora runs each model with that adapter (repeatable; model/lora.hpp),
// for what running adapters unmerged costs against the same model without.
// --kv-type sets the KV pages' element type (default f32, as `troupe`'s);
// llama-bench's cache is f16, so `--kv-type f16` decodes over as many KV
// bytes as it does.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/read_bandwidth.hpp"
#include "core/cpu_features.hpp"
#include "kernels/cpu_backend.hpp"
#include "memory/kv_type.hpp"
#include "model/generator.hpp"
#include "model/model.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts{1, 2};
  int64_t n_prefill = 512, n_decode = 32;
  int repeat = 1;
  std::vector<std::string> models;
  troupe::ModelLoadOptions load;
  troupe::KvType kv_type = troupe::KvType::f32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      thread_counts = parse_list(argv[++i]);
    } else if (a == "--prefill" && i + 1 < argc) {
      n_prefill = std::stoll(argv[++i]);
    } else if (a == "--decode" && i + 1 < argc) {
      n_decode = std::stoll(argv[++i]);
    } else if (a == "--repeat" && i + 1 < argc) {
      repeat = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--exact-math") {
      troupe::set_exact_math(true);
    } else if (a == "--batch-invariant") {
      troupe::set_batch_invariant(true);
    } else if (a == "--no-amx") {
      troupe::set_amx_enabled(false);
    } else if (a == "--f32-matmul-precision" && i + 1 < argc) {
      const auto p = troupe::parse_f32_precision(argv[++i]);
      if (!p) {
        models.clear();
        break;
      }
      troupe::set_f32_matmul_precision(*p);
    } else if (a == "--isa" && i + 1 < argc) {
      const auto isa = troupe::parse_isa(argv[++i]);
      if (!isa) {
        models.clear();
        break;
      }
      troupe::force_isa(*isa);
    } else if (a == "--dots256" && i + 1 < argc) {
      const auto d = troupe::parse_dots256(argv[++i]);
      if (!d) {
        models.clear();
        break;
      }
      troupe::force_dots256(*d);
    } else if (a == "--lora" && i + 1 < argc) {
      load.lora.push_back({.path = argv[++i]});
    } else if (a == "--kv-type" && i + 1 < argc) {
      try {
        kv_type = troupe::parse_kv_type(argv[++i]);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        models.clear();
        break;
      }
    } else if (a == "--cpu-affinity" && i + 1 < argc) {
      troupe::set_cpu_affinity(troupe::parse_cpu_list(argv[++i]));
    } else if (a.starts_with("-")) {
      models.clear();
      break;
    } else {
      models.push_back(a);
    }
  }
  if (models.empty()) {
    std::fprintf(stderr,
                 "usage: bench_generate [--threads 1,2] [--prefill 512] [--decode 32] [--repeat N] [--exact-math] "
                 "[--batch-invariant] [--no-amx] [--f32-matmul-precision highest|high|medium] "
                 "[--isa avx2|avx512|scalar] [--dots256 pairs|avx_vnni|avx512_vnni] "
                 "[--cpu-affinity LIST] [--lora ADAPTER] [--kv-type f32|f16|bf16|q8_0] model.gguf...\n");
    return 2;
  }

  std::printf("kernels: %s\n", troupe::cpu_math_summary().c_str());
  std::printf("\n| model | threads | weights MB | prefill %lld tok/s | decode tok/s | decode roofline tok/s "
              "| of roofline |\n",
              static_cast<long long>(n_prefill));
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const std::string& path : models) {
    const auto load_start = Clock::now();
    auto model = troupe::Model::load(path, load);
    std::fprintf(stderr, "%s: loaded in %.2f s, %.0f MB made at load\n", path.c_str(),
                 std::chrono::duration<double>(Clock::now() - load_start).count(),
                 static_cast<double>(model->stored_bytes()) / 1e6);
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> pick(3, static_cast<int32_t>(model->config().n_vocab - 1));
    std::vector<int32_t> prompt(static_cast<size_t>(n_prefill));
    for (auto& t : prompt) t = pick(rng);
    const std::string name = path.substr(path.find_last_of('/') + 1) + (load.lora.empty() ? "" : " + LoRA");
    const double mb = static_cast<double>(model->weight_bytes()) / 1e6;
    std::vector<double> bandwidth;
    for (int t : thread_counts) {
      bandwidth.push_back(troupe::bench::read_bandwidth_gbs(static_cast<size_t>(model->weight_bytes()), t));
      std::fprintf(stderr, "%s: read bandwidth over %.0f MB, %d thread(s): %.1f GB/s\n", name.c_str(), mb, t,
                   bandwidth.back());
    }
    for (size_t ti = 0; ti < thread_counts.size(); ++ti) {
      std::vector<double> prefills, decodes;
      for (int rep = 0; rep < repeat; ++rep) {
        troupe::CpuBackend backend({.n_threads = thread_counts[ti]});
        troupe::Generator gen(model, backend,
                              {.n_ctx = n_prefill + n_decode + 16, .prefill_chunk = n_prefill, .kv_type = kv_type});
        // Warm-up touches every weight page once (the file is memory-mapped).
        const troupe::GenerateRequest greedy{.max_new_tokens = 2, .sampling = {.temperature = 0}, .stop_tokens = {-1}};
        gen.generate(std::span(prompt.data(), std::min<size_t>(8, prompt.size())), greedy);
        troupe::GenerateRequest run = greedy;
        run.max_new_tokens = std::max<int64_t>(1, n_decode);
        gen.generate(prompt, run);
        const troupe::GenerateStats s = gen.stats();
        prefills.push_back(static_cast<double>(s.prompt_tokens) / s.prefill_seconds);
        // The first sampled token comes from the prefill's logits; the other
        // n-1 each cost one decode step.
        if (s.generated_tokens > 1) decodes.push_back(static_cast<double>(s.generated_tokens - 1) / s.decode_seconds);
      }
      const double prefill = median(prefills);
      const double roof = bandwidth[ti] * 1e3 / mb;
      if (decodes.empty()) {  // --decode 0 or 1: no decode step ran
        std::printf("| %s | %d | %.0f | %.1f | - | %.1f | - |\n", name.c_str(), thread_counts[ti], mb, prefill, roof);
      } else {
        const double decode = median(decodes);
        std::printf("| %s | %d | %.0f | %.1f | %.1f | %.1f | %.0f%% |\n", name.c_str(), thread_counts[ti], mb, prefill,
                    decode, roof, 100.0 * decode / roof);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
