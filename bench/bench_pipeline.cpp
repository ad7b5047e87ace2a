// The actor pipeline against the engine called directly: aggregate tokens/s
// of 1, 8, 32 concurrent streams against the same requests run one at a time
// (Generator, one loop), the time per decode step through the actors against
// the direct loop (the actor overhead), and 2 stages against 1. Prints
// Markdown tables.
//   bench_pipeline [--tokens 64] [--prompt 32] [--streams 1,8,32] [--threads 2]
//                  [--overhead-tokens 128] [--reps 5] model.gguf
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/generator.hpp"
#include "model/model_tokenizer.hpp"

namespace {

using BenchClock = std::chrono::steady_clock;

struct Args {
  int tokens = 64;
  int prompt = 32;
  std::vector<int> streams = {1, 8, 32};
  int threads = 2;
  int overhead_tokens = 128;  // generated per run of the overhead measurement
  int reps = 5;               // its runs of each kind (best taken)
  std::string model;
};

double since(BenchClock::time_point t0) {
  return std::chrono::duration<double>(BenchClock::now() - t0).count();
}

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

troupe::GenerateParams params_for(const Args& a) {
  troupe::GenerateParams p{.max_new_tokens = a.tokens, .ignore_eos = true};
  p.sampling.temperature = 0.0f;
  return p;
}

struct DirectResult {
  double tokens_per_s = 0;  // one request at a time, prefill included
  double step_ms = 0;       // per decode step (sampling included)
};

DirectResult run_direct(const std::shared_ptr<const troupe::Model>& model, const Args& a,
                        const std::vector<std::vector<int32_t>>& prompts) {
  troupe::CpuBackend backend({.n_threads = a.threads});
  troupe::Generator gen(model, backend, {.prefill_chunk = 512});
  troupe::GenerateRequest req{.max_new_tokens = a.tokens};
  req.sampling.temperature = 0.0f;
  req.stop_tokens = {-1};  // never stops early, like ignore_eos
  gen.generate(prompts[0], req);  // warm-up
  DirectResult r;
  double decode_s = 0;
  int64_t decode_steps = 0;
  const auto t0 = BenchClock::now();
  int64_t n = 0;
  for (const auto& p : prompts) {
    n += static_cast<int64_t>(gen.generate(p, req).size());
    decode_s += gen.stats().decode_seconds;
    decode_steps += gen.stats().generated_tokens - 1;  // the first token comes from prefill
  }
  r.tokens_per_s = static_cast<double>(n) / since(t0);
  r.step_ms = decode_steps > 0 ? decode_s / static_cast<double>(decode_steps) * 1e3 : 0;
  return r;
}

struct PipelineResult {
  double tokens_per_s = 0;
  double step_ms = 0;  // 1 stream: (total - first token) / (tokens - 1)
};

PipelineResult run_pipeline(troupe::Pipeline& p, const Args& a, const std::vector<std::vector<int32_t>>& prompts) {
  p.generate(prompts[0], params_for(a)).get();  // warm-up: buffers, threads
  const auto t0 = BenchClock::now();
  std::vector<std::future<troupe::Completion>> runs;
  for (const auto& prompt : prompts) runs.push_back(p.generate(prompt, params_for(a)));
  int64_t n = 0;
  double step_ms = 0;
  for (auto& r : runs) {
    const troupe::Completion c = r.get();
    n += c.final.completion_tokens;
    if (c.final.completion_tokens > 1) {
      step_ms = (c.final.total_seconds - c.final.first_token_seconds) / (c.final.completion_tokens - 1) * 1e3;
    }
  }
  return {.tokens_per_s = static_cast<double>(n) / since(t0), .step_ms = step_ms};
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
    if (k == "--tokens") {
      a.tokens = std::stoi(value());
    } else if (k == "--prompt") {
      a.prompt = std::stoi(value());
    } else if (k == "--streams") {
      a.streams = parse_list(value());
    } else if (k == "--threads") {
      a.threads = std::stoi(value());
    } else if (k == "--overhead-tokens") {
      a.overhead_tokens = std::stoi(value());
    } else if (k == "--reps") {
      a.reps = std::stoi(value());
    } else if (!k.empty() && k[0] != '-') {
      a.model = k;
    } else {
      return false;
    }
  }
  return !a.model.empty() && a.tokens >= 2 && a.prompt >= 1 && !a.streams.empty() && a.overhead_tokens >= 2 &&
         a.reps >= 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: %s [--tokens 64] [--prompt 32] [--streams 1,8,32] [--threads 2] [--overhead-tokens 128] "
                 "[--reps 5] model.gguf\n",
                 argv[0]);
    return 2;
  }
  try {
    auto model = troupe::Model::load(a.model);
    const auto tokenizer = troupe::load_model_tokenizer(*model);
    const int max_streams = *std::max_element(a.streams.begin(), a.streams.end());
    const auto prompts = make_prompts(*tokenizer, max_streams, a.prompt);
    const int64_t n_layer = model->config().n_layer;
    std::printf("model %s: %lld layers, n_embd %lld; prompts of %d tokens, %d generated each, %d threads\n\n",
                a.model.c_str(), static_cast<long long>(n_layer), static_cast<long long>(model->config().n_embd),
                a.prompt, a.tokens, a.threads);

    struct Topology {
      std::string name;
      std::vector<troupe::StageSpec> stages;
    };
    std::vector<Topology> topologies = {{"1 stage x " + std::to_string(a.threads) + " threads",
                                         {{.first_layer = 0, .last_layer = -1, .threads = a.threads}}}};
    if (n_layer >= 2) {
      const int t = std::max(1, a.threads / 2);
      topologies.push_back({"2 stages x " + std::to_string(t) + " thread" + (t > 1 ? "s" : ""),
                            {{.first_layer = 0, .last_layer = n_layer / 2, .threads = t},
                             {.first_layer = n_layer / 2, .last_layer = -1, .threads = t}}});
    }

    // The direct runs first, while no actor system exists to compete for the cores.
    std::vector<DirectResult> direct;
    for (const int s : a.streams) {
      direct.push_back(run_direct(model, a, {prompts.begin(), prompts.begin() + s}));
    }

    std::printf("| topology | streams | one at a time (tok/s) | actor pipeline (tok/s) | speed-up |\n");
    std::printf("|---|---|---|---|---|\n");
    for (const Topology& topo : topologies) {
      troupe::PipelineConfig cfg{.model = model, .stages = topo.stages};
      cfg.scheduler.max_batch_size = std::max(32, max_streams);
      cfg.scheduler.max_tokens_per_step = std::max(512, max_streams * a.prompt);
      cfg.n_kv_blocks = max_streams * ((a.prompt + a.tokens) / 16 + 2) + 16;
      cfg.prefix_caching = false;
      auto pipeline = troupe::Pipeline::start(cfg);
      for (size_t i = 0; i < a.streams.size(); ++i) {
        const int s = a.streams[i];
        const PipelineResult piped = run_pipeline(*pipeline, a, {prompts.begin(), prompts.begin() + s});
        std::printf("| %s | %d | %.1f | %.1f | %.2fx |\n", topo.name.c_str(), s, direct[i].tokens_per_s,
                    piped.tokens_per_s, piped.tokens_per_s / direct[i].tokens_per_s);
      }
    }
    // The actor overhead: one stream, the direct loop and the pipeline run
    // alternately (so both see the same machine load), best of a few each.
    std::printf("\n| decode step, 1 stream, %d tokens | direct loop (ms) | actor pipeline (ms) | actor overhead |\n",
                a.overhead_tokens);
    std::printf("|---|---|---|---|\n");
    {
      troupe::PipelineConfig cfg{.model = model, .stages = topologies[0].stages};
      cfg.prefix_caching = false;
      auto pipeline = troupe::Pipeline::start(cfg);
      Args one = a;
      one.tokens = a.overhead_tokens;
      const std::vector<std::vector<int32_t>> first(prompts.begin(), prompts.begin() + 1);
      double best_direct = 1e30;
      double best_pipeline = 1e30;
      for (int rep = 0; rep < a.reps; ++rep) {
        best_direct = std::min(best_direct, run_direct(model, one, first).step_ms);
        best_pipeline = std::min(best_pipeline, run_pipeline(*pipeline, one, first).step_ms);
      }
      std::printf("| %s | %.3f | %.3f | %+.1f%% |\n", topologies[0].name.c_str(), best_direct, best_pipeline,
                  (best_pipeline / best_direct - 1.0) * 100.0);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pipeline: %s\n", e.what());
    return 1;
  }
}
