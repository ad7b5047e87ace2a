// Sampler: greedy ties, each filter's surviving set on hand-picked logits,
// penalty arithmetic (llama.cpp/HF repetition penalty, OpenAI presence and
// frequency), OpenAI-style logprobs, seeded determinism, and a chi-square
// check of temperature sampling. Expected values are worked out by hand or in
// double precision here; probabilities are compared to 1e-6.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "model/sampler.hpp"

namespace troupe {
namespace {

std::vector<int32_t> tokens_of(std::span<const SampleCandidate> c) {
  std::vector<int32_t> t;
  for (const SampleCandidate& x : c) t.push_back(x.token);
  return t;
}

// Logits whose softmax is exactly `probs` (up to rounding).
std::vector<float> logits_for(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

TEST(Sampler, GreedyTakesArgmaxAndLowestIdOnTies) {
  Sampler s({.temperature = 0.0f});
  std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(s.sample(logits, {}), 1);
  std::vector<float> masked = {-INFINITY, std::numeric_limits<float>::quiet_NaN(), -5.0f, -INFINITY};
  EXPECT_EQ(s.sample(masked, {}), 2);
  std::vector<float> none = {-INFINITY, -INFINITY};
  EXPECT_THROW(s.sample(none, {}), Error);
}

// Greedy over a real vocabulary's size scans in blocks and lanes: the answer
// must still be the plain scan's, the lowest id among ties, wherever the max
// sits (first element, across blocks, in the ragged tail) and with NaN and
// -inf about.
TEST(Sampler, GreedyOverALargeVocabMatchesAPlainScan) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> dist(-300, 300);  // coarse values: many ties
  std::vector<float> base(49157);                      // not a multiple of any block or lane count
  for (float& x : base) x = static_cast<float>(dist(rng)) * 0.1f;
  auto plain = [](const std::vector<float>& l) {
    int32_t best = -1;
    for (size_t i = 0; i < l.size(); ++i) {
      if (!std::isnan(l[i]) && (best < 0 ? l[i] > -INFINITY : l[i] > l[static_cast<size_t>(best)])) {
        best = static_cast<int32_t>(i);
      }
    }
    return best;
  };
  Sampler s({.temperature = 0.0f});
  auto check = [&](std::vector<float> l, const char* what) {
    const int32_t want = plain(l);
    EXPECT_EQ(s.sample(l, {}), want) << what;
  };
  check(base, "coarse ties");
  auto v = base;
  v[0] = 100.0f;
  check(v, "max first");
  v = base;
  v[v.size() - 1] = 100.0f;
  check(v, "max last, in the tail");
  v = base;
  v[7000] = v[30000] = 100.0f;  // a tie across blocks
  check(v, "tie across blocks");
  v = base;
  for (size_t i = 0; i < v.size(); i += 3) v[i] = std::numeric_limits<float>::quiet_NaN();
  v[20001] = -INFINITY;
  check(v, "NaN every third");
  v = base;
  v[40000] = INFINITY;
  check(v, "+inf");
}

TEST(Sampler, TopKKeepsTheKBestWithLowerIdWinningTies) {
  const std::vector<float> base = {0.5f, 2.0f, 1.0f, 3.0f, 2.0f, -1.0f};
  {
    Sampler s({.top_k = 3});
    auto logits = base;
    EXPECT_EQ(tokens_of(s.candidates(logits, {})), (std::vector<int32_t>{3, 1, 4}));
  }
  Sampler s({.top_k = 2});
  auto logits = base;
  auto c = s.candidates(logits, {});
  ASSERT_EQ(tokens_of(c), (std::vector<int32_t>{3, 1}));
  const double z = std::exp(3.0) + std::exp(2.0);
  EXPECT_NEAR(c[0].prob, std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(c[1].prob, std::exp(2.0) / z, 1e-6);
  // top_k >= n_vocab is no filter.
  Sampler all({.top_k = 50});
  logits = base;
  EXPECT_EQ(all.candidates(logits, {}).size(), base.size());
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingTheMass) {
  // Probabilities in scrambled id order: id 3: 0.5, id 0: 0.2, id 4: 0.15, id 1: 0.1, id 2: 0.05.
  const auto base = logits_for({0.2, 0.1, 0.05, 0.5, 0.15});
  auto run = [&](float top_p, float temperature) {
    Sampler s({.temperature = temperature, .top_p = top_p});
    auto logits = base;
    return tokens_of(s.candidates(logits, {}));
  };
  EXPECT_EQ(run(0.3f, 1.0f), (std::vector<int32_t>{3}));
  EXPECT_EQ(run(0.6f, 1.0f), (std::vector<int32_t>{3, 0}));        // 0.5 + 0.2 >= 0.6
  EXPECT_EQ(run(0.75f, 1.0f), (std::vector<int32_t>{3, 0, 4}));    // 0.85 >= 0.75
  EXPECT_EQ(run(0.96f, 1.0f), (std::vector<int32_t>{3, 0, 4, 1, 2}));
  // Temperature comes first: at T = 2 the probabilities become
  // sqrt(p) / sum = 0.340, 0.215, 0.186, ... so 0.6 needs three tokens.
  EXPECT_EQ(run(0.6f, 2.0f), (std::vector<int32_t>{3, 0, 4}));
  // sample() draws only from that set.
  Sampler d({.top_p = 0.6f, .seed = 4});
  int hits[5] = {};
  for (int i = 0; i < 1000; ++i) {
    auto logits = base;
    ++hits[d.sample(logits, {})];
  }
  EXPECT_EQ(hits[1] + hits[2] + hits[4], 0);
  EXPECT_NEAR(hits[3] / 1000.0, 0.5 / 0.7, 0.05);
}

TEST(Sampler, TopPOverALargeVocabMatchesAFullSort) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> base(150000);
  for (float& x : base) x = dist(rng);
  for (float top_p : {0.05f, 0.5f, 0.9f}) {
    Sampler s({.top_p = top_p});
    auto logits = base;
    const auto c = s.candidates(logits, {});
    // Reference: every token by (logit desc, id asc), masses in double.
    std::vector<int32_t> order(base.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return base[a] > base[b] || (base[a] == base[b] && a < b);
    });
    const double m = base[order[0]];
    double z = 0;
    for (float x : base) z += std::exp(x - m);
    ASSERT_GE(c.size(), 1u);
    double before_last = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      ASSERT_EQ(c[i].token, order[i]) << "top_p=" << top_p << " rank " << i;
      if (i + 1 < c.size()) before_last += std::exp(base[order[i]] - m) / z;
    }
    const double mass = before_last + std::exp(base[order[c.size() - 1]] - m) / z;
    EXPECT_LT(before_last, top_p + 1e-6) << "the set must be the smallest one";
    EXPECT_GE(mass, top_p - 1e-6) << "the set must reach top_p";
  }
}

TEST(Sampler, MinPKeepsTokensAboveAFractionOfTheBest) {
  // id: 0: 0.06, 1: 0.4, 2: 0.2, 3: 0.3, 4: 0.04.
  const auto base = logits_for({0.06, 0.4, 0.2, 0.3, 0.04});
  auto run = [&](float min_p) {
    Sampler s({.min_p = min_p});
    auto logits = base;
    return tokens_of(s.candidates(logits, {}));
  };
  EXPECT_EQ(run(0.2f), (std::vector<int32_t>{1, 3, 2}));  // threshold 0.08
  EXPECT_EQ(run(0.6f), (std::vector<int32_t>{1, 3}));     // threshold 0.24
  EXPECT_EQ(run(1.0f), (std::vector<int32_t>{1}));
  EXPECT_EQ(run(0.05f), (std::vector<int32_t>{1, 3, 2, 0, 4}));  // threshold 0.02
  // sample() draws only from that set.
  Sampler d({.min_p = 0.6f, .seed = 9});
  int hits[5] = {};
  for (int i = 0; i < 1000; ++i) {
    auto logits = base;
    ++hits[d.sample(logits, {})];
  }
  EXPECT_EQ(hits[0] + hits[2] + hits[4], 0);
  EXPECT_NEAR(hits[1] / 1000.0, 0.4 / 0.7, 0.05);
}

TEST(Sampler, FiltersCombineAndRenormalise) {
  // id: 0: 0.05, 1: 0.35, 2: 0.25, 3: 0.2, 4: 0.1, 5: 0.05.
  const auto base = logits_for({0.05, 0.35, 0.25, 0.2, 0.1, 0.05});
  // top_k 4 -> {1, 2, 3, 4}, mass 0.9: renormalised 0.389, 0.278, 0.222, 0.111.
  // top_p 0.8 -> 0.389 + 0.278 + 0.222 = 0.889 >= 0.8: {1, 2, 3}.
  // min_p 0.6 -> keep p >= 0.6 * 0.35 = 0.21: {1, 2}.
  Sampler s({.top_k = 4, .top_p = 0.8f, .min_p = 0.6f});
  auto logits = base;
  const auto c = s.candidates(logits, {});
  ASSERT_EQ(tokens_of(c), (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(c[0].prob, 0.35 / 0.6, 1e-6);
  EXPECT_NEAR(c[1].prob, 0.25 / 0.6, 1e-6);
  // sample() draws only from that set.
  Sampler d({.top_k = 4, .top_p = 0.8f, .min_p = 0.6f, .seed = 3});
  int hits[6] = {};
  for (int i = 0; i < 2000; ++i) {
    logits = base;
    ++hits[d.sample(logits, {})];
  }
  EXPECT_EQ(hits[0] + hits[3] + hits[4] + hits[5], 0);
  EXPECT_GT(hits[1], 0);
  EXPECT_GT(hits[2], 0);
}

TEST(Sampler, PenaltiesFollowTheirConventions) {
  // repetition 2: positive / 2, negative * 2; then presence 0.5 once per seen
  // token and frequency 0.25 per occurrence.
  Sampler s({.temperature = 0.0f, .repetition_penalty = 2.0f, .presence_penalty = 0.5f, .frequency_penalty = 0.25f});
  std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f};
  const std::vector<int32_t> history = {3, 1, 0, 3, 1, 3};
  EXPECT_EQ(s.sample(logits, history), 2);  // 0.5 is now the best
  EXPECT_FLOAT_EQ(logits[0], 2.0f / 2 - 0.5f - 0.25f * 1);   // 0.25
  EXPECT_FLOAT_EQ(logits[1], -1.0f * 2 - 0.5f - 0.25f * 2);  // -3
  EXPECT_FLOAT_EQ(logits[2], 0.5f);                          // not seen
  EXPECT_FLOAT_EQ(logits[3], 3.0f / 2 - 0.5f - 0.25f * 3);   // 0.25

  // Repetition penalty alone flips a close greedy choice.
  Sampler r({.temperature = 0.0f, .repetition_penalty = 1.1f});
  std::vector<float> close = {3.0f, 2.9f};
  EXPECT_EQ(r.sample(close, std::vector<int32_t>{0}), 1);
  // A history token outside the vocab is an error.
  std::vector<float> small = {1.0f, 2.0f};
  EXPECT_THROW(r.sample(small, std::vector<int32_t>{2}), Error);
}

TEST(Sampler, PenaltiesSeeOnlyTheirWindow) {
  const std::vector<float> base = {2.0f, -1.0f, 0.5f, 3.0f};
  const std::vector<int32_t> history = {3, 1, 0, 3, 1, 3};
  auto penalized = [&](int32_t last_n) {
    Sampler s({.temperature = 0.0f,
               .repetition_penalty = 2.0f,
               .presence_penalty = 0.5f,
               .frequency_penalty = 0.25f,
               .penalty_last_n = last_n});
    std::vector<float> logits = base;
    s.sample(logits, history);
    return logits;
  };
  // The last 3 tokens (3, 1, 3): token 0 falls out of the window, 3 counts twice, 1 once.
  const std::vector<float> w3 = penalized(3);
  EXPECT_FLOAT_EQ(w3[0], 2.0f);
  EXPECT_FLOAT_EQ(w3[1], -1.0f * 2 - 0.5f - 0.25f * 1);
  EXPECT_FLOAT_EQ(w3[2], 0.5f);
  EXPECT_FLOAT_EQ(w3[3], 3.0f / 2 - 0.5f - 0.25f * 2);
  // 0: no penalty at all; -1 and a window past the history: every token.
  EXPECT_EQ(penalized(0), base);
  EXPECT_EQ(penalized(-1), penalized(100));
  EXPECT_FLOAT_EQ(penalized(-1)[0], 2.0f / 2 - 0.5f - 0.25f * 1);
  EXPECT_THROW(Sampler({.penalty_last_n = -2}), Error);
}

TEST(Sampler, LogprobsAreLogSoftmaxOfTheRawLogits) {
  const std::vector<float> base = {1.0f, 2.0f, 3.0f, 0.0f};
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(0.0));
  // Penalties and temperature change the choice but not the reported logprobs.
  Sampler s({.temperature = 0.0f, .repetition_penalty = 10.0f, .n_logprobs = 2});
  auto logits = base;
  const int32_t tok = s.sample(logits, std::vector<int32_t>{2});
  EXPECT_EQ(tok, 1);
  EXPECT_NEAR(s.chosen_logprob(), 2.0 - lse, 1e-6);
  ASSERT_EQ(s.top_logprobs().size(), 2u);
  EXPECT_EQ(s.top_logprobs()[0].token, 2);
  EXPECT_NEAR(s.top_logprobs()[0].logprob, 3.0 - lse, 1e-6);
  EXPECT_EQ(s.top_logprobs()[1].token, 1);
  EXPECT_NEAR(s.top_logprobs()[1].logprob, 2.0 - lse, 1e-6);

  Sampler chosen_only({.logprobs = true});
  logits = base;
  const int32_t t2 = chosen_only.sample(logits, {});
  EXPECT_NEAR(chosen_only.chosen_logprob(), base[t2] - lse, 1e-6);
  EXPECT_TRUE(chosen_only.top_logprobs().empty());

  Sampler off({});
  logits = base;
  off.sample(logits, {});
  EXPECT_TRUE(std::isnan(off.chosen_logprob()));
}

TEST(Sampler, SameSeedSameTokensOtherSeedOtherTokens) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> base(1000);
  for (float& x : base) x = dist(rng);
  const SamplingParams p{.temperature = 1.0f, .top_k = 100, .top_p = 0.95f, .seed = 1234};
  Sampler a(p), b(p);
  SamplingParams q = p;
  q.seed = 1235;
  Sampler c(q);
  int differ = 0;
  for (int i = 0; i < 64; ++i) {
    auto la = base, lb = base, lc = base;
    const int32_t ta = a.sample(la, {});
    EXPECT_EQ(ta, b.sample(lb, {}));
    differ += ta != c.sample(lc, {});
  }
  EXPECT_GT(differ, 32);
}

TEST(Sampler, TemperatureSamplingFollowsTheSoftmax) {
  // 20000 draws at T = 0.7 against softmax(logits / 0.7). Pearson's statistic
  // with 4 degrees of freedom exceeds 18.47 with probability 0.001.
  const std::vector<float> base = {1.0f, 2.0f, 0.0f, 1.5f, -1.0f};
  const float t = 0.7f;
  std::vector<double> want(base.size());
  double z = 0;
  for (size_t i = 0; i < base.size(); ++i) z += want[i] = std::exp(base[i] / double(t));
  for (double& w : want) w /= z;

  Sampler s({.temperature = t, .seed = 42});
  const int n = 20000;
  std::vector<int> hits(base.size());
  for (int i = 0; i < n; ++i) {
    auto logits = base;
    ++hits[s.sample(logits, {})];
  }
  double chi2 = 0;
  for (size_t i = 0; i < base.size(); ++i) chi2 += std::pow(hits[i] - n * want[i], 2) / (n * want[i]);
  EXPECT_LT(chi2, 18.47);
}

TEST(Sampler, TopKOverALargeVocabMatchesAFullSort) {
  std::mt19937 rng(8);
  std::uniform_int_distribution<int> dist(-3000, 3000);  // coarse values: many ties
  std::vector<float> base(150000);
  for (float& x : base) x = static_cast<float>(dist(rng)) * 0.01f;
  Sampler s({.top_k = 40});
  auto logits = base;
  const auto got = tokens_of(s.candidates(logits, {}));
  std::vector<int32_t> order(base.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return base[a] > base[b] || (base[a] == base[b] && a < b); });
  order.resize(40);
  EXPECT_EQ(got, order);
}

TEST(Sampler, RejectsOutOfRangeParameters) {
  EXPECT_THROW(Sampler({.temperature = -1.0f}), Error);
  EXPECT_THROW(Sampler({.top_k = -1}), Error);
  EXPECT_THROW(Sampler({.top_p = 0.0f}), Error);
  EXPECT_THROW(Sampler({.top_p = 1.5f}), Error);
  EXPECT_THROW(Sampler({.min_p = 2.0f}), Error);
  EXPECT_THROW(Sampler({.repetition_penalty = 0.0f}), Error);
  EXPECT_THROW(Sampler({.n_logprobs = 21}), Error);
  Sampler ok({});
  std::vector<float> empty;
  EXPECT_THROW(ok.sample(empty, {}), Error);
}

}  // namespace
}  // namespace troupe
