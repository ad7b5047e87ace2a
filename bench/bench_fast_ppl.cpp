// The accuracy cost of the fast paths (int8 activations for quantized
// weights, bf16 dot products for f16/bf16 weights) against exact math, in the
// same run: perplexity of a fixed text under each, and the
// mean and max |delta logprob| per token.
//   bench_fast_ppl [--tokens 2048] [--threads 2] --text FILE [--text FILE...] model.gguf...
// The files' text, back to back, is tokenized by each model's tokenizer and
// cut to the first --tokens tokens (at most the model's context).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/generator.hpp"
#include "model/model.hpp"
#include "model/model_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

std::vector<double> logprobs(const std::shared_ptr<const troupe::Model>& model, const std::vector<int32_t>& tokens,
                             int threads, bool exact) {
  troupe::set_exact_math(exact);
  troupe::CpuBackend backend({.n_threads = threads});  // repacks for the fast paths unless exact
  troupe::Generator gen(model, backend, {.n_ctx = static_cast<int64_t>(tokens.size()) + 1});
  return gen.token_logprobs(tokens);
}

double perplexity(const std::vector<double>& lp) {
  double sum = 0;
  for (double v : lp) sum += v;
  return std::exp(-sum / static_cast<double>(lp.size()));
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n_tokens = 2048;
  int threads = 2;
  std::vector<std::string> texts, models;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tokens" && i + 1 < argc) {
      n_tokens = std::stoll(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::stoi(argv[++i]);
    } else if (a == "--text" && i + 1 < argc) {
      texts.push_back(argv[++i]);
    } else {
      models.push_back(a);
    }
  }
  if (texts.empty() || models.empty()) {
    std::fprintf(stderr, "usage: bench_fast_ppl [--tokens 2048] [--threads 2] --text FILE... model.gguf...\n");
    return 2;
  }
  std::string text;
  for (const std::string& f : texts) {
    std::ifstream in(f);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", f.c_str());
      return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    text += ss.str();
  }
  std::printf("| model | tokens | perplexity, exact | perplexity, fast | change | mean abs Δ logprob | max abs Δ logprob |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (const std::string& path : models) {
    auto model = troupe::Model::load(path);
    auto tokenizer = troupe::load_model_tokenizer(*model);
    std::vector<int32_t> tokens = tokenizer->encode(text, true, false);
    int64_t n = std::min<int64_t>(n_tokens, static_cast<int64_t>(tokens.size()));
    if (model->config().n_ctx_train > 0) n = std::min<int64_t>(n, model->config().n_ctx_train - 1);
    tokens.resize(static_cast<size_t>(n));
    const std::vector<double> exact = logprobs(model, tokens, threads, true);
    const std::vector<double> fast = logprobs(model, tokens, threads, false);
    double mean = 0, worst = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      const double d = std::abs(exact[i] - fast[i]);
      mean += d;
      worst = std::max(worst, d);
    }
    mean /= static_cast<double>(exact.size());
    const double pe = perplexity(exact), pq = perplexity(fast);
    const std::string name = path.substr(path.find_last_of('/') + 1);
    std::printf("| %s | %lld | %.4f | %.4f | %+.2f%% | %.2e | %.2e |\n", name.c_str(), static_cast<long long>(n), pe,
                pq, 100.0 * (pq / pe - 1.0), mean, worst);
    std::fflush(stdout);
  }
  return 0;
}
