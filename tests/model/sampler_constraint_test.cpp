// Sampler with an output constraint and logit_bias: greedy takes the best
// allowed token (masking only when the argmax is refused), sampling follows
// the softmax renormalised over the allowed tokens (a chi-square check),
// top-k acts on what the constraint leaves, and logprobs stay those of the
// raw logits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "core/error.hpp"
#include "model/sampler.hpp"

namespace troupe {
namespace {

// Allows a fixed set of tokens; counts how often each entry point ran.
class SetConstraint final : public TokenConstraint {
 public:
  explicit SetConstraint(std::set<int32_t> ok) : ok_(std::move(ok)) {}
  bool allows(int32_t t) override {
    ++checks;
    return ok_.contains(t);
  }
  void mask(std::span<float> logits) override {
    ++masks;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!ok_.contains(static_cast<int32_t>(i))) logits[i] = -std::numeric_limits<float>::infinity();
    }
  }
  void accept(int32_t) override {}
  bool done() const override { return false; }
  int checks = 0, masks = 0;

 private:
  std::set<int32_t> ok_;
};

TEST(SamplerConstraint, GreedyMasksOnlyWhenTheArgmaxIsRefused) {
  Sampler s({.temperature = 0.0f});
  SetConstraint c({1, 3});
  std::vector<float> l = {0.0f, 5.0f, 9.0f, 1.0f};
  EXPECT_EQ(s.sample(l, {}, &c), 1);  // 2 is the argmax but refused
  EXPECT_EQ(c.masks, 1);
  std::vector<float> m = {0.0f, 9.0f, 5.0f, 1.0f};
  EXPECT_EQ(s.sample(m, {}, &c), 1);  // allowed argmax: no mask
  EXPECT_EQ(c.masks, 1);
  SetConstraint none({});
  std::vector<float> n = {0.0f, 1.0f};
  try {
    s.sample(n, {}, &none);
    FAIL() << "sampled a refused token";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allows no token"), std::string::npos) << e.what();
  }
}

TEST(SamplerConstraint, SamplingFollowsTheRenormalisedSoftmax) {
  // 20000 draws at T = 1 over tokens {0, 2, 4} of five: p_i = e^{l_i} / sum
  // over the allowed. Pearson's statistic with 2 degrees of freedom exceeds
  // 13.82 with probability 0.001.
  const std::vector<float> base = {1.0f, 3.0f, 0.5f, 2.5f, 2.0f};
  const std::vector<int32_t> ok = {0, 2, 4};
  double z = 0;
  for (int32_t t : ok) z += std::exp(double(base[static_cast<size_t>(t)]));
  Sampler s({.temperature = 1.0f, .seed = 3});
  SetConstraint c({0, 2, 4});
  std::vector<int> hits(base.size());
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto l = base;
    ++hits[static_cast<size_t>(s.sample(l, {}, &c))];
  }
  EXPECT_EQ(hits[1] + hits[3], 0);
  double chi2 = 0;
  for (int32_t t : ok) {
    const double want = n * std::exp(double(base[static_cast<size_t>(t)])) / z;
    chi2 += std::pow(hits[static_cast<size_t>(t)] - want, 2) / want;
  }
  EXPECT_LT(chi2, 13.82);
}

TEST(SamplerConstraint, TopKActsOnTheAllowedTokens) {
  // top_k 1 after the mask is greedy over the allowed tokens: always 4.
  Sampler s({.temperature = 1.0f, .top_k = 1, .seed = 9});
  SetConstraint c({0, 4});
  for (int i = 0; i < 50; ++i) {
    std::vector<float> l = {1.0f, 3.0f, 0.5f, 2.5f, 2.0f};
    EXPECT_EQ(s.sample(l, {}, &c), 4);
  }
}

TEST(SamplerConstraint, LogitBiasShiftsTheChoiceButNotTheLogprobs) {
  SamplingParams p{.temperature = 0.0f, .n_logprobs = 2, .logprobs = true};
  p.logit_bias = {{.token = 0, .bias = 10.0f}, {.token = 2, .bias = -100.0f}};
  Sampler s(p);
  std::vector<float> l = {1.0f, 2.0f, 3.0f};
  EXPECT_EQ(s.sample(l, {}), 0);  // 1 + 10 beats 2; 3 - 100 is out
  // Logprobs are the raw logits' log-softmax, as without a bias.
  const double z = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(s.chosen_logprob(), 1.0 - z, 1e-5);
  ASSERT_EQ(s.top_logprobs().size(), 2u);
  EXPECT_EQ(s.top_logprobs()[0].token, 2);
  EXPECT_NEAR(s.top_logprobs()[0].logprob, 3.0 - z, 1e-5);
}

TEST(SamplerConstraint, LogitBiasWithPenaltiesKeepsTheRawLogprob) {
  // Token 1 is biased and penalised: its reported logprob is still raw.
  SamplingParams p{.temperature = 0.0f, .presence_penalty = 1.0f, .logprobs = true};
  p.logit_bias = {{.token = 1, .bias = 5.0f}};
  Sampler s(p);
  std::vector<float> l = {2.0f, 1.0f, 0.0f};
  const std::vector<int32_t> history = {1, 1};
  EXPECT_EQ(s.sample(l, history), 1);  // 1 + 5 - 1 = 5 beats 2
  const double z = std::log(std::exp(2.0) + std::exp(1.0) + std::exp(0.0));
  EXPECT_NEAR(s.chosen_logprob(), 1.0 - z, 1e-5);
}

TEST(SamplerConstraint, LogitBiasRangeIsChecked) {
  SamplingParams p;
  p.logit_bias = {{.token = 1, .bias = 100.5f}};
  try {
    check_sampling(p);
    FAIL() << "accepted a bias above 100";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.param(), "logit_bias");
  }
  p.logit_bias = {{.token = 7, .bias = 1.0f}};
  Sampler s(p);
  std::vector<float> l = {0.0f, 1.0f};
  EXPECT_THROW(s.sample(l, {}), Error);  // token 7 is outside a vocab of 2
}

}  // namespace
}  // namespace troupe
