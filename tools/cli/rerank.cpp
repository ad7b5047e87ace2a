// `troupe rerank`: a query's documents scored by a cross-encoder, through
// the actor pipeline as /v1/rerank scores them (each pair joined by the
// tokenizer's pair template, cut to the context), one JSON line per
// document on stdout in the documents' order: {"index", "tokens", "score"}.
#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"
#include "core/error.hpp"
#include "tools/cli/classifier_options.hpp"
#include "tools/cli/commands.hpp"
#include "tools/cli/cpu_options.hpp"
#include "tools/cli/quantize_option.hpp"

namespace troupe::cli {
namespace {

struct RerankArgs {
  CpuArgs cpu;
  std::string model;
  std::string query;
  std::vector<std::string> documents;
  int threads = 0;
  std::string quantize;
  ClassifierArgs classifier;
};

void run_rerank(const RerankArgs& a) {
  apply_cpu_options(a.cpu);
  PipelineConfig c{.model_path = a.model};
  if (!a.quantize.empty()) c.load.quantize = quantize_scheme(a.quantize);
  apply_classifier_options(a.classifier, c.load);
  c.stages = {{.first_layer = 0, .last_layer = -1, .threads = a.threads}};
  const auto pipeline = Pipeline::start(c);
  const ModelInfo& info = pipeline->model_info();
  if (info.n_labels != 1) {
    throw Error(Errc::invalid_argument, info.name +
                                            " is not a cross-encoder of one label (a reranker); "
                                            "an embedding model's scores are the cosine of `troupe embed`'s vectors");
  }
  std::vector<std::future<Completion>> runs;
  for (const std::string& doc : a.documents) {
    EngineRequest r = EngineRequest::from_pair(a.query, doc);
    r.params.embed = {.on = true, .truncate = -1};
    runs.push_back(pipeline->generate(std::move(r)));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const FinalEvent f = runs[i].get().final;
    if (f.reason != EndReason::stop) {
      throw Error(f.error_code, "document " + std::to_string(i) + ": " + f.error_message);
    }
    const double logit = f.embedding.at(0);
    const double score = info.score_sigmoid ? 1.0 / (1.0 + std::exp(-logit)) : logit;
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, score).ptr;
    const std::string line = "{\"index\":" + std::to_string(i) + ",\"tokens\":" + std::to_string(f.prompt_tokens) +
                             ",\"score\":" + std::string(buf, end) + "}\n";
    std::fputs(line.c_str(), stdout);
  }
}

}  // namespace

void add_rerank_command(CLI::App& app) {
  auto a = std::make_shared<RerankArgs>();
  CLI::App* cmd =
      app.add_subcommand("rerank", "Score documents against a query with a cross-encoder, one JSON line each");
  add_cpu_options(cmd, &a->cpu);
  cmd->add_option("-m,--model", a->model, "GGUF file or Hugging Face directory of a cross-encoder")->required();
  cmd->add_option("-q,--query", a->query, "The query")->required();
  cmd->add_option("documents", a->documents, "The documents to score")->required();
  add_quantize_option(cmd, &a->quantize);
  add_classifier_options(cmd, &a->classifier);
  cmd->add_option("-t,--threads", a->threads, "CPU threads (0: all hardware threads)")->check(CLI::NonNegativeNumber);
  cmd->callback([a] { run_rerank(*a); });
}

}  // namespace troupe::cli
