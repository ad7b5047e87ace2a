// `troupe embed`: the embeddings of texts, through the actor pipeline as
// /v1/embeddings computes them, one JSON line per text on stdout:
// {"index", "tokens", "embedding"}.
#include <CLI/CLI.hpp>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"
#include "core/error.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/cpu_options.hpp"
#include "tools/cli/quantize_option.hpp"

namespace troupe::cli {
namespace {

struct EmbedArgs {
  CpuArgs cpu;
  std::string model;
  std::vector<std::string> texts;
  std::string pooling;  // empty: the model's
  int dimensions = 0;
  int threads = 0;
  int ctx = 0;
  std::string quantize;
};

void run_embed(const EmbedArgs& a) {
  apply_cpu_options(a.cpu);
  PipelineConfig c{.model_path = a.model};
  if (!a.quantize.empty()) c.load.quantize = quantize_scheme(a.quantize);
  c.stages = {{.first_layer = 0, .last_layer = -1, .threads = a.threads}};
  c.embedding = true;
  c.pooling = a.pooling;
  if (a.ctx > 0) c.scheduler.context_length = a.ctx;
  const auto pipeline = Pipeline::start(c);
  if (pipeline->model_info().n_labels > 0) {
    throw Error(Errc::invalid_argument,
                pipeline->model_info().name + " is a cross-encoder: it scores pairs (troupe rerank), not texts");
  }
  std::vector<std::future<Completion>> runs;
  for (const std::string& text : a.texts) {
    EngineRequest r = EngineRequest::from_text({.text = text});
    r.params.embed = {.on = true, .dimensions = a.dimensions};
    runs.push_back(pipeline->generate(std::move(r)));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const FinalEvent f = runs[i].get().final;
    if (f.reason != EndReason::stop) {
      throw Error(f.error_code, "text " + std::to_string(i) + ": " + f.error_message);
    }
    std::string line =
        "{\"index\":" + std::to_string(i) + ",\"tokens\":" + std::to_string(f.prompt_tokens) + ",\"embedding\":[";
    for (size_t k = 0; k < f.embedding.size(); ++k) {
      char buf[32];
      const auto end = std::to_chars(buf, buf + sizeof buf, f.embedding[k]).ptr;
      if (k > 0) line += ',';
      line.append(buf, end);
    }
    line += "]}\n";
    std::fputs(line.c_str(), stdout);
  }
}

}  // namespace

void add_embed_command(CLI::App& app) {
  auto a = std::make_shared<EmbedArgs>();
  CLI::App* cmd = app.add_subcommand("embed", "Print the embeddings of texts, one JSON line each");
  add_cpu_options(cmd, &a->cpu);
  cmd->add_option("-m,--model", a->model, "GGUF file or Hugging Face directory of an embedding model")->required();
  cmd->add_option("texts", a->texts, "The texts to embed")->required();
  add_quantize_option(cmd, &a->quantize);
  cmd->add_option("--pooling", a->pooling,
                  "last, mean or cls (default: what the model declares, else last; an encoder's cls)")
      ->check(CLI::IsMember({"last", "mean", "cls"}));
  cmd->add_option("--dimensions", a->dimensions, "Keep the first N dimensions, normalized again (Matryoshka)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-t,--threads", a->threads, "CPU threads (0: all hardware threads)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--ctx", a->ctx, "Longest input in tokens (default: the model's trained context, at most 4096)")
      ->check(CLI::PositiveNumber);
  cmd->callback([a] { run_embed(*a); });
}

}  // namespace troupe::cli
