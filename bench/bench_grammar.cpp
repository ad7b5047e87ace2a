// Structured output's cost against the sampling step it rides on, in the
// same run, per tokenizer: the vocabulary trie's build, a whole-vocab mask
// (the walk and the cached lookups), and the greedy check of one token,
// each set beside Sampler::sample over the same vocabulary (temperature 1,
// top_p 0.95: what a sampled request pays anyway; temperature 0: greedy).
//
// Also tool_choice "auto" with the hermes syntax: the lazy grammar's mask
// while the output is still text (before any "<tool_call>").
//
// The document is a fixed JSON value the schema below accepts, tokenized by
// each tokenizer; every one of its tokens is one step: mask, check, accept.
//   bench_grammar [--rounds 3] TOKENIZER_DIR...   (folders with tokenizer.json)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "grammar/json_schema.hpp"
#include "grammar/lazy_token_grammar.hpp"
#include "grammar/tool_call_grammar.hpp"
#include "grammar/token_grammar.hpp"
#include "model/sampler.hpp"
#include "model/vocab_trie.hpp"
#include "tokenizer/hf_tokenizer.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) { return std::chrono::duration<double, std::micro>(Clock::now() - t0).count(); }

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string"},
    "address": {"type": "object", "properties": {
        "street": {"type": "string"}, "city": {"type": "string"}, "zip": {"type": "string", "maxLength": 10}},
      "required": ["street", "city"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "scores": {"type": "array", "items": {"type": "number"}},
    "active": {"type": "boolean"}
  },
  "required": ["name", "age", "address", "tags", "active"]
})";

const char* kDocument = R"({
  "name": "Ada Lovelace of Ockham Park, Surrey",
  "age": 36,
  "email": "ada@analytical-engine.org",
  "address": {
    "street": "12 St James's Square",
    "city": "London",
    "zip": "SW1Y 4JH"
  },
  "tags": ["mathematics", "poetical science", "Bernoulli numbers", "notes"],
  "scores": [98.5, 87.25, 100, 3.14159],
  "active": false
})";

const char* kProse =
    "Let me check the weather for you. Paris is usually mild in spring, with rain now and then; "
    "I will look up the current conditions <b>before</b> answering, so the figures are today's.";

const char* kTools = R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}}])";

struct Row {
  double lazy_us = 0, lazy_first_setup_us = 0, lazy_setup_us = 0;
  double trie_ms = 0, walk_us = 0, walk_max_us = 0, lookup_us = 0, check_us = 0, sample_us = 0, greedy_us = 0;
  size_t walks = 0, steps = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

Row measure(const troupe::Tokenizer& tok, int rounds) {
  Row row;
  const auto t0 = Clock::now();
  const auto trie = troupe::vocab_trie(tok);
  row.trie_ms = us_since(t0) / 1000.0;
  const auto grammar = troupe::grammar::json_schema_grammar(kSchema);
  const std::vector<int32_t> doc = tok.encode(kDocument, false, false);
  const auto n_vocab = static_cast<size_t>(tok.n_vocab());
  std::vector<float> logits(n_vocab);

  std::vector<double> walk, lookup, check;
  for (int r = 0; r < rounds; ++r) {
    troupe::grammar::TokenGrammar g(grammar, trie);
    for (int32_t t : doc) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      const uint64_t walks_before = g.stats().walks;
      const auto m0 = Clock::now();
      g.mask(logits);
      const double us = us_since(m0);
      (g.stats().walks > walks_before ? walk : lookup).push_back(us);
      const auto c0 = Clock::now();
      const bool ok = g.allows(t);
      check.push_back(us_since(c0));
      if (!ok || !std::isfinite(logits[static_cast<size_t>(t)])) {
        std::fprintf(stderr, "token %d of the document refused: the tokenizer split it where the grammar cannot\n", t);
        std::exit(1);
      }
      g.accept(t);
    }
    if (r == 0) {
      row.walks = g.stats().walks;
      row.steps = doc.size();
    }
  }
  std::vector<double> lazy;
  const std::string format = troupe::grammar::tool_choice_format(troupe::grammar::ToolCallSyntax::hermes, kTools, "",
                                                                 true, /*lazy=*/true);
  const auto lazy_grammar = troupe::grammar::tool_call_grammar(format);
  for (int r = 0; r < rounds; ++r) {
    // A request's setup: the first one over a vocabulary finds the tokens
    // that can complete the trigger; the others take them from the cache.
    const auto s0 = Clock::now();
    troupe::grammar::LazyTokenGrammar g("<tool_call>", lazy_grammar, trie);
    (r == 0 ? row.lazy_first_setup_us : row.lazy_setup_us) = us_since(s0);
    for (int32_t t : tok.encode(kProse, false, false)) {
      std::fill(logits.begin(), logits.end(), 0.0f);
      const auto m0 = Clock::now();
      g.mask(logits);
      lazy.push_back(us_since(m0));
      g.accept(t);
    }
  }
  row.lazy_us = median(lazy);
  // The baselines: one sampling step over the same vocabulary.
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> base(n_vocab);
  for (float& x : base) x = normal(rng);
  std::vector<double> sample, greedy;
  troupe::Sampler sampled({.temperature = 1.0f, .top_p = 0.95f, .seed = 1});
  troupe::Sampler argmax({.temperature = 0.0f});
  for (int i = 0; i < rounds * static_cast<int>(doc.size()); ++i) {
    logits = base;
    auto s0 = Clock::now();
    (void)sampled.sample(logits, {});
    sample.push_back(us_since(s0));
    logits = base;
    s0 = Clock::now();
    (void)argmax.sample(logits, {});
    greedy.push_back(us_since(s0));
  }
  row.walk_us = median(walk);
  row.walk_max_us = walk.empty() ? 0.0 : *std::max_element(walk.begin(), walk.end());
  row.lookup_us = median(lookup);
  row.check_us = median(check);
  row.sample_us = median(sample);
  row.greedy_us = median(greedy);
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 3;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      dirs.push_back(a);
    }
  }
  if (dirs.empty()) {
    std::fprintf(stderr, "usage: bench_grammar [--rounds N] TOKENIZER_DIR...\n");
    return 2;
  }
  std::printf("| tokenizer | n_vocab | doc tokens | walks | trie build ms | mask walk us (median, max) | cached mask us | "
              "check one token us | sample step us (T=1, top_p .95) | walk / sample step | greedy step us | "
              "check / greedy step | auto tools: waiting mask us | auto tools: setup us (first, then) |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& dir : dirs) {
    const auto tok = troupe::load_hf_tokenizer(dir);
    const Row r = measure(*tok, rounds);
    std::printf("| %s | %d | %zu | %zu | %.1f | %.1f, %.0f | %.1f | %.2f | %.1f | %.2f | %.1f | %.3f | %.2f | %.0f, %.1f |\n",
                dir.substr(dir.find_last_of('/') + 1).c_str(), tok->n_vocab(), r.steps, r.walks, r.trie_ms, r.walk_us,
                r.walk_max_us,
                r.lookup_us, r.check_us, r.sample_us, r.walk_us / r.sample_us, r.greedy_us, r.check_us / r.greedy_us,
                r.lazy_us, r.lazy_first_setup_us, r.lazy_setup_us);
  }
  return 0;
}
