// Batched decode through the actor pipeline with a GPU stage: aggregate
// tokens/s of 1, 8, 32 and 128 concurrent streams (each its own request:
// tokenizer, scheduler, executor on "cuda:N", sampler, detokenizer), for all
// layers on the GPU and, with --hybrid, the first half of the layers on the
// CPU and the rest on the GPU (the `--gpu-layers` split, hidden states
// crossing through pinned host buffers). Any GGUF model works;
// troupe-make-model writes one of a real model's shape. Prints Markdown.
//   bench_cuda_pipeline [--device cuda:0] [--streams 1,8,32,128] [--tokens 64]
//                       [--prompt 32] [--hybrid] [--threads 0] [--out file.md] model.gguf
// Without a usable GPU it prints "bench_cuda_pipeline: no CUDA device:
// <reason>" and exits with 77 (the tests' skip code).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"
#include "kernels/cuda_backend.hpp"
#include "model/model_tokenizer.hpp"

namespace {

using BenchClock = std::chrono::steady_clock;

struct Args {
  std::string device = "cuda:0";
  std::vector<int> streams = {1, 8, 32, 128};
  int tokens = 64;
  int prompt = 32;
  bool hybrid = false;
  int threads = 0;  // the CPU stage's kernel threads (--hybrid); 0: all
  std::string out;
  std::string model;
};

// Prompts of random ordinary tokens (no BOS/EOS), one per stream.
std::vector<std::vector<int32_t>> make_prompts(const troupe::Tokenizer& tok, int n, int len) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> pick(3, tok.n_vocab() - 1);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(n));
  for (auto& p : out) {
    while (static_cast<int>(p.size()) < len) {
      const int32_t t = pick(rng);
      if (!tok.is_special(t)) p.push_back(t);
    }
  }
  return out;
}

struct RunResult {
  double tokens_per_s = 0;   // all streams together, prefill included
  double step_ms = 0;        // mean time between a stream's tokens after its first
};

RunResult run(troupe::Pipeline& p, const Args& a, const std::vector<std::vector<int32_t>>& prompts) {
  troupe::GenerateParams params{.max_new_tokens = a.tokens, .ignore_eos = true};
  params.sampling.temperature = 0.0f;
  const auto t0 = BenchClock::now();
  std::vector<std::future<troupe::Completion>> runs;
  for (const auto& prompt : prompts) runs.push_back(p.generate(prompt, params));
  int64_t n = 0;
  double step_sum = 0;
  int n_step = 0;
  for (auto& r : runs) {
    const troupe::Completion c = r.get();
    if (c.final.reason == troupe::EndReason::error) {
      throw troupe::Error(c.final.error_code, "a request failed: " + c.final.error_message);
    }
    n += c.final.completion_tokens;
    if (c.final.completion_tokens > 1) {
      step_sum += (c.final.total_seconds - c.final.first_token_seconds) / (c.final.completion_tokens - 1);
      ++n_step;
    }
  }
  const double wall = std::chrono::duration<double>(BenchClock::now() - t0).count();
  return {.tokens_per_s = static_cast<double>(n) / wall, .step_ms = n_step > 0 ? step_sum / n_step * 1e3 : 0};
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoi(item));
  return out;
}

bool parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (k == "--device") {
      a.device = value();
    } else if (k == "--streams") {
      a.streams = parse_list(value());
    } else if (k == "--tokens") {
      a.tokens = std::stoi(value());
    } else if (k == "--prompt") {
      a.prompt = std::stoi(value());
    } else if (k == "--threads") {
      a.threads = std::stoi(value());
    } else if (k == "--hybrid") {
      a.hybrid = true;
    } else if (k == "--out") {
      a.out = value();
    } else if (!k.empty() && k[0] != '-') {
      a.model = k;
    } else {
      return false;
    }
  }
  return !a.model.empty() && a.tokens >= 2 && a.prompt >= 1 && !a.streams.empty() &&
         *std::min_element(a.streams.begin(), a.streams.end()) >= 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: %s [--device cuda:0] [--streams 1,8,32,128] [--tokens 64] [--prompt 32] [--hybrid] "
                 "[--threads 0] [--out file.md] model.gguf\n",
                 argv[0]);
    return 2;
  }
  std::string why;
  if (!troupe::cuda_available(&why)) {
    const std::string prefix = "no usable CUDA device: ";
    if (why.rfind(prefix, 0) == 0) why = why.substr(prefix.size());
    std::fprintf(stderr, "bench_cuda_pipeline: no CUDA device: %s\n", why.c_str());
    return 77;
  }
  try {
    auto model = troupe::Model::load(a.model);
    const auto tokenizer = troupe::load_model_tokenizer(*model);
    const int max_streams = *std::max_element(a.streams.begin(), a.streams.end());
    const auto prompts = make_prompts(*tokenizer, max_streams, a.prompt);
    const int64_t n_layer = model->config().n_layer;

    struct Topology {
      std::string name;
      std::vector<troupe::StageSpec> stages;
    };
    std::vector<Topology> topologies = {
        {"all " + std::to_string(n_layer) + " layers on " + a.device,
         {{.first_layer = 0, .last_layer = -1, .threads = 1, .device = a.device}}}};
    if (a.hybrid && n_layer >= 2) {
      const int64_t split = n_layer / 2;
      topologies.push_back({"layers 0-" + std::to_string(split - 1) + " on cpu, " + std::to_string(split) + "-" +
                                std::to_string(n_layer - 1) + " on " + a.device,
                            {{.first_layer = 0, .last_layer = split, .threads = a.threads, .device = "cpu"},
                             {.first_layer = split, .last_layer = -1, .threads = 1, .device = a.device}}});
    }

    std::stringstream out;
    out << "# Batched decode through the actor pipeline\n\nmodel " << a.model << " (" << model->config().name
        << ": " << n_layer << " layers, n_embd " << model->config().n_embd << ", "
        << static_cast<double>(model->weight_bytes()) / 1e9 << " GB of weights); prompts of " << a.prompt
        << " tokens, " << a.tokens << " generated each, greedy\n\n"
        << "| topology | streams | aggregate tok/s | per-stream decode step (ms) |\n|---|---|---|---|\n";
    for (const Topology& topo : topologies) {
      troupe::PipelineConfig cfg{.model = model, .stages = topo.stages};
      cfg.scheduler.max_batch_size = std::max(32, max_streams);
      cfg.scheduler.max_tokens_per_step = std::max(512, max_streams * a.prompt);
      cfg.n_kv_blocks = max_streams * ((a.prompt + a.tokens) / 16 + 2) + 16;
      cfg.prefix_caching = false;
      auto pipeline = troupe::Pipeline::start(cfg);
      run(*pipeline, a, {prompts.begin(), prompts.begin() + 1});  // warm-up: buffers, graphs, threads
      for (const int s : a.streams) {
        const RunResult r = run(*pipeline, a, {prompts.begin(), prompts.begin() + s});
        char line[256];
        std::snprintf(line, sizeof line, "| %s | %d | %.1f | %.2f |\n", topo.name.c_str(), s, r.tokens_per_s,
                      r.step_ms);
        out << line;
        std::fputs(line, stdout);
        std::fflush(stdout);
      }
    }
    if (!a.out.empty()) std::ofstream(a.out, std::ios::app) << out.str() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_pipeline: %s\n", e.what());
    return 1;
  }
}
