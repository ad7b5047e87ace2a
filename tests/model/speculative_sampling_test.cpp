// Speculative decoding's two plain parts: the prompt-lookup proposer, and
// the sampler's verification of a proposed token, whose output must be
// distributed as the target's (rejection sampling), checked by chi-square
// with fixed seeds, and equal to the argmax under greedy decoding.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "model/ngram_proposer.hpp"
#include "model/sampler.hpp"

namespace troupe {
namespace {

std::vector<int32_t> proposal(const NgramProposer& p, const std::vector<int32_t>& tokens, int32_t k) {
  std::vector<int32_t> out;
  const int32_t n = p.propose(tokens, k, out);
  EXPECT_EQ(n, static_cast<int32_t>(out.size()));
  return out;
}

TEST(NgramProposer, ProposesWhatFollowedTheLongestRecurringSuffix) {
  const NgramProposer p({.min_n = 1, .max_n = 3});
  // Suffix [7 8 9] occurred at the start, followed by 10 11 12.
  EXPECT_EQ(proposal(p, {7, 8, 9, 10, 11, 12, 5, 7, 8, 9}, 2), (std::vector<int32_t>{10, 11}));
  // k past what follows: only what there is.
  EXPECT_EQ(proposal(p, {7, 8, 9, 10, 7, 8, 9}, 8), (std::vector<int32_t>{10, 7, 8, 9}));
  // The longest suffix wins over a more recent shorter one: [2 3] follows
  // "1 2 3" once and "9 3" later; 3 alone would take the newer match.
  EXPECT_EQ(proposal(p, {1, 2, 3, 4, 9, 3, 5, 1, 2, 3}, 1), (std::vector<int32_t>{4}));
  // Among equal suffixes, the most recent occurrence.
  EXPECT_EQ(proposal(p, {5, 6, 1, 5, 6, 2, 5, 6}, 1), (std::vector<int32_t>{2}));
  // Nothing recurs, or k = 0.
  EXPECT_TRUE(proposal(p, {1, 2, 3, 4}, 4).empty());
  EXPECT_TRUE(proposal(p, {1, 2, 1, 2}, 0).empty());
  EXPECT_TRUE(proposal(p, {}, 4).empty());
}

TEST(NgramProposer, MinimumLengthAndWindowAreHonoured) {
  const NgramProposer two({.min_n = 2, .max_n = 4});
  EXPECT_TRUE(proposal(two, {4, 1, 9, 4}, 2).empty());  // only a 1-token suffix recurs
  const NgramProposer narrow({.min_n = 2, .max_n = 2, .window = 4});
  EXPECT_TRUE(proposal(narrow, {1, 2, 3, 0, 0, 0, 0, 1, 2}, 1).empty());  // the match is out of the window
  EXPECT_THROW(NgramProposer({.min_n = 0}), Error);
  EXPECT_THROW(NgramProposer({.min_n = 3, .max_n = 2}), Error);
}

// Softmax of logits / t, the target distribution without filters.
std::vector<double> softmax(const std::vector<float>& logits, double t) {
  std::vector<double> p(logits.size());
  double z = 0;
  for (size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp(logits[i] / t);
  for (double& v : p) v /= z;
  return p;
}

// Pearson's chi-square of counts against probabilities (cells with p > 0).
double chi_square(const std::vector<int>& counts, const std::vector<double>& p, int n) {
  double x2 = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " is impossible";
      continue;
    }
    const double e = p[i] * n;
    x2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return x2;
}

TEST(SpeculativeSampling, VerifyKeepsTheTargetDistribution) {
  const std::vector<float> logits = {1.0f, 0.2f, 2.1f, -0.5f, 1.4f, 0.0f, -1.0f, 0.7f};
  constexpr int kDraws = 40000;
  // Critical chi-square values at p = 0.001 for 7 and 2 degrees of freedom.
  constexpr double kCrit7 = 24.32, kCrit2 = 13.82;
  for (const int32_t draft : {2, 4, 6}) {  // a likely, a middling and an unlikely proposal
    SCOPED_TRACE("draft " + std::to_string(draft));
    Sampler s({.temperature = 0.8f, .seed = 1234u + static_cast<uint64_t>(draft)});
    std::vector<int> counts(logits.size(), 0);
    int accepted = 0;
    for (int i = 0; i < kDraws; ++i) {
      std::vector<float> l = logits;
      const int32_t t = s.verify(l, {}, draft);
      ++counts[static_cast<size_t>(t)];
      accepted += t == draft;
    }
    const std::vector<double> p = softmax(logits, 0.8);
    EXPECT_LT(chi_square(counts, p, kDraws), kCrit7);
    // Accepted as often as the target would choose it.
    EXPECT_NEAR(static_cast<double>(accepted) / kDraws, p[static_cast<size_t>(draft)], 0.01);
  }
  // Filtered (top_k = 3): the target is the renormalised top 3, and a
  // proposal outside it is always rejected.
  for (const int32_t draft : {4, 3}) {
    SCOPED_TRACE("top_k 3, draft " + std::to_string(draft));
    Sampler s({.temperature = 1.0f, .top_k = 3, .seed = 99u});
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < kDraws; ++i) {
      std::vector<float> l = logits;
      ++counts[static_cast<size_t>(s.verify(l, {}, draft))];
    }
    std::vector<double> p(logits.size(), 0.0);
    const double z = std::exp(2.1) + std::exp(1.4) + std::exp(1.0);
    p[2] = std::exp(2.1) / z;
    p[4] = std::exp(1.4) / z;
    p[0] = std::exp(1.0) / z;
    EXPECT_LT(chi_square(counts, p, kDraws), kCrit2);
  }
}

TEST(SpeculativeSampling, GreedyVerifyIsTheArgmaxAndReportsLogprobs) {
  Sampler s({.temperature = 0.0f, .n_logprobs = 2, .logprobs = true});
  std::vector<float> l = {0.1f, 3.0f, 0.5f};
  EXPECT_EQ(s.verify(l, {}, 1), 1);
  const float want = 3.0f - std::log(std::exp(0.1f) + std::exp(3.0f) + std::exp(0.5f));
  EXPECT_NEAR(s.chosen_logprob(), want, 1e-5);
  ASSERT_EQ(s.top_logprobs().size(), 2u);
  l = {0.1f, 3.0f, 0.5f};
  EXPECT_EQ(s.verify(l, {}, 2), 1);  // rejected: the argmax instead
  // Penalties apply as in sample(): a repeated token loses its lead.
  Sampler pen({.temperature = 0.0f, .repetition_penalty = 100.0f});
  l = {0.1f, 3.0f, 0.5f};
  const std::vector<int32_t> history = {1};
  EXPECT_EQ(pen.verify(l, history, 1), 2);
  l = {0.1f, 3.0f, 0.5f};
  EXPECT_THROW(s.verify(l, {}, 3), Error);
}

TEST(SpeculativeSampling, ScoreReportsALogprobWithoutDrawing) {
  Sampler a({.temperature = 1.0f, .seed = 7, .n_logprobs = 1});
  Sampler b({.temperature = 1.0f, .seed = 7, .n_logprobs = 1});
  const std::vector<float> l = {0.0f, 1.0f, 2.0f};
  a.score(l, 0);
  EXPECT_NEAR(a.chosen_logprob(), -std::log(1.0 + std::exp(1.0) + std::exp(2.0)), 1e-5);
  ASSERT_EQ(a.top_logprobs().size(), 1u);
  EXPECT_EQ(a.top_logprobs()[0].token, 2);
  // The random stream is untouched: the next draws agree.
  for (int i = 0; i < 20; ++i) {
    std::vector<float> la = l, lb = l;
    EXPECT_EQ(a.sample(la, {}), b.sample(lb, {}));
  }
}

}  // namespace
}  // namespace troupe
