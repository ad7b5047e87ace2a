// Speculative decoding against plain decoding, one stream at a time through
// the actor pipeline, in the same run: decode tokens/s (first token
// excluded) and the acceptance rate, per prompt set and proposer. The sets
// are chat requests where copying from the prompt pays (repeat, summarise,
// edit code) and where it should not (free writing). The proposers: ngram
// (prompt lookup), self:L (the model's first L layers), draft:PATH (a draft
// model with the same vocabulary). Greedy, so every pipeline must produce
// the same tokens; the bench checks it. Each round runs plain and every
// proposer, the order rotating, so that a machine's drift hits all alike.
//   bench_speculative [--tokens 128] [--rounds 3] [--draft 4] [--threads 2] [--cost 0.1]
//                     [--proposers ngram,self:8,draft:small.gguf] model.gguf
// Prints a Markdown table.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"

namespace {

struct Args {
  int tokens = 128;
  int rounds = 3;
  int draft = 4;
  int threads = 2;
  double cost = 0.1;
  std::vector<std::string> proposers = {"ngram"};
  std::string model;
};

const char* kPassage =
    "The lighthouse keeper climbed the spiral stairs every evening at dusk. He trimmed the wick, polished the "
    "great lens, and wrote the weather in a leather book: wind from the north-west, a heavy swell, three ships "
    "passing to the south. In forty years the light had never failed, not in the storm of the long winter nor in "
    "the fog that hid the harbour for a week. When the engineers came to fit an electric lamp, he showed them the "
    "book and asked only that they keep writing in it.";

const char* kCode =
    "def count_words(lines):\n"
    "    count = 0\n"
    "    for line in lines:\n"
    "        words = line.split()\n"
    "        count += len(words)\n"
    "    return count\n\n"
    "def average_length(lines):\n"
    "    count = count_words(lines)\n"
    "    if count == 0:\n"
    "        return 0.0\n"
    "    return sum(len(w) for line in lines for w in line.split()) / count\n";

struct PromptSet {
  const char* name;
  std::string user;
};

std::vector<PromptSet> prompt_sets() {
  return {
      {"repeat", std::string("Repeat the following text exactly, word for word:\n\n") + kPassage},
      {"summarise", std::string("Summarise this text in two sentences, reusing its words:\n\n") + kPassage},
      {"code edit", std::string("Rename the variable `count` to `total` in this code and show the whole code:\n\n") + kCode},
      {"free writing", "Write a short story about a fox who learns to sing."},
  };
}

troupe::EngineRequest request_for(const PromptSet& set, const Args& a) {
  troupe::ChatPrompt chat;
  chat.messages.push_back({.role = "user", .content = set.user});
  troupe::GenerateParams params{.max_new_tokens = a.tokens, .ignore_eos = false};
  params.sampling.temperature = 0.0f;
  return troupe::EngineRequest::from_chat(std::move(chat), params);
}

// proposer: "" (plain), "ngram", "self:L" or "draft:PATH".
std::unique_ptr<troupe::Pipeline> start(const std::shared_ptr<const troupe::Model>& model, const Args& a,
                                        const std::string& proposer) {
  troupe::PipelineConfig c{.model = model,
                           .stages = {{.first_layer = 0, .last_layer = -1, .threads = a.threads}}};
  c.scheduler.spec_max_draft = proposer.empty() ? 0 : a.draft;
  if (proposer.rfind("self:", 0) == 0) c.draft_layers = std::stoi(proposer.substr(5));
  if (proposer.rfind("draft:", 0) == 0) c.draft_model_path = proposer.substr(6);
  c.scheduler.spec_token_cost = a.cost;
  c.scheduler.context_length = 2048;
  c.n_kv_blocks = 256;
  return troupe::Pipeline::start(std::move(c));
}

struct Run {
  double decode_s = 0;
  int64_t decode_tokens = 0;
  std::vector<int32_t> tokens;
};

Run run_one(troupe::Pipeline& p, const troupe::EngineRequest& r) {
  const troupe::Completion c = p.generate(r).get();
  if (c.final.reason == troupe::EndReason::error) {
    std::fprintf(stderr, "bench_speculative: %s\n", c.final.error_message.c_str());
    std::exit(1);
  }
  Run out;
  for (const troupe::TokenEvent& e : c.tokens) out.tokens.push_back(e.token);
  out.decode_s = c.final.total_seconds - c.final.first_token_seconds;
  out.decode_tokens = static_cast<int64_t>(out.tokens.size()) - 1;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    auto next = [&](const char* flag) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_speculative: %s needs a value\n", flag);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--tokens")) a.tokens = std::stoi(next("--tokens"));
    else if (!std::strcmp(argv[i], "--rounds")) a.rounds = std::stoi(next("--rounds"));
    else if (!std::strcmp(argv[i], "--draft")) a.draft = std::stoi(next("--draft"));
    else if (!std::strcmp(argv[i], "--threads")) a.threads = std::stoi(next("--threads"));
    else if (!std::strcmp(argv[i], "--cost")) a.cost = std::stod(next("--cost"));
    else if (!std::strcmp(argv[i], "--proposers")) {
      a.proposers.clear();
      std::string list = next("--proposers");
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) a.proposers.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    }
    else a.model = argv[i];
  }
  if (a.model.empty()) {
    std::fprintf(stderr, "usage: bench_speculative [--tokens N] [--rounds R] [--draft K] [--threads T] [--cost C] "
                         "[--proposers ngram,self:L,draft:PATH] model.gguf\n");
    return 2;
  }
  const std::shared_ptr<const troupe::Model> model = troupe::Model::load(a.model);
  auto plain = start(model, a, "");
  std::vector<std::unique_ptr<troupe::Pipeline>> specs;
  for (const std::string& p : a.proposers) specs.push_back(start(model, a, p));
  const std::vector<PromptSet> sets = prompt_sets();

  std::printf("| prompt set | proposer | plain tok/s | speculative tok/s | speed-up | proposed | accepted | acceptance | same output |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  const size_t n = specs.size();
  for (const PromptSet& set : sets) {
    const troupe::EngineRequest r = request_for(set, a);
    run_one(*plain, r);  // warm-up of each
    for (auto& sp : specs) run_one(*sp, r);
    Run p_sum;
    std::vector<Run> s_sum(n);
    std::vector<bool> same(n, true);
    std::vector<troupe::PipelineStats> before;
    for (auto& sp : specs) before.push_back(sp->stats());
    for (int round = 0; round < a.rounds; ++round) {
      // Plain and each proposer once per round, starting at a rotating place.
      std::vector<Run> got(n + 1);
      for (size_t j = 0; j <= n; ++j) {
        const size_t w = (j + static_cast<size_t>(round)) % (n + 1);
        got[w] = run_one(w == 0 ? *plain : *specs[w - 1], r);
      }
      p_sum.decode_s += got[0].decode_s;
      p_sum.decode_tokens += got[0].decode_tokens;
      for (size_t k = 0; k < n; ++k) {
        same[k] = same[k] && got[k + 1].tokens == got[0].tokens;
        s_sum[k].decode_s += got[k + 1].decode_s;
        s_sum[k].decode_tokens += got[k + 1].decode_tokens;
      }
    }
    const double p_tps = static_cast<double>(p_sum.decode_tokens) / p_sum.decode_s;
    for (size_t k = 0; k < n; ++k) {
      const troupe::PipelineStats after = specs[k]->stats();
      const double s_tps = static_cast<double>(s_sum[k].decode_tokens) / s_sum[k].decode_s;
      const uint64_t proposed = after.spec_proposed - before[k].spec_proposed;
      const uint64_t accepted = after.spec_accepted - before[k].spec_accepted;
      std::printf("| %s | %s | %.1f | %.1f | %.2fx | %llu | %llu | %.0f%% | %s |\n", set.name, a.proposers[k].c_str(),
                  p_tps, s_tps, s_tps / p_tps, static_cast<unsigned long long>(proposed),
                  static_cast<unsigned long long>(accepted),
                  proposed > 0 ? 100.0 * static_cast<double>(accepted) / static_cast<double>(proposed) : 0.0,
                  same[k] ? "yes" : "NO");
    }
    std::fflush(stdout);
  }
  return 0;
}
