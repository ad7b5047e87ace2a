// plan_workload: the same plan for the same seed, the statistics each knob
// asks for (Poisson gaps, length distributions, prefix and batch shares),
// prompts built as documented (BOS, shared prefixes, ordinary tokens,
// traces, datasets) and never longer than the cap.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "experiments/workload.hpp"
#include "workload_test_util.hpp"

namespace troupe {
namespace {

using test::stories_tokenizer;
using test::temp_dir;
using test::write_file;

WorkloadSpec poisson(double rate, int32_t n, uint64_t seed = 7) {
  return WorkloadSpec{.name = "t",
                      .seed = seed,
                      .n_requests = n,
                      .arrival = {.kind = ArrivalSpec::Kind::poisson, .rate = rate},
                      .prompt_tokens = {.kind = LengthDist::Kind::fixed, .value = 4},
                      .output_tokens = {.kind = LengthDist::Kind::fixed, .value = 8}};
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double variance_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / static_cast<double>(v.size() - 1);
}

std::vector<double> output_lengths(const std::vector<PlannedRequest>& plan) {
  std::vector<double> v;
  for (const PlannedRequest& r : plan) v.push_back(r.max_new_tokens);
  return v;
}

bool same_plan(const std::vector<PlannedRequest>& a, const std::vector<PlannedRequest>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].index != b[i].index || a[i].arrival_s != b[i].arrival_s || a[i].prompt != b[i].prompt ||
        a[i].max_new_tokens != b[i].max_new_tokens || a[i].priority != b[i].priority ||
        a[i].prefix_group != b[i].prefix_group) {
      return false;
    }
  }
  return true;
}

// Everything a seed decides at once: lengths, prefixes, priorities, arrivals.
WorkloadSpec busy_spec(uint64_t seed) {
  WorkloadSpec w = poisson(3.0, 200, seed);
  w.prompt_tokens = {.kind = LengthDist::Kind::uniform, .min = 4, .max = 60};
  w.output_tokens = {.kind = LengthDist::Kind::lognormal, .mean = 20, .stddev = 10, .min = 1, .max = 100};
  w.shared_prefix_fraction = 0.5;
  w.prefix_tokens = 16;
  w.prefix_groups = 3;
  w.batch_fraction = 0.3;
  return w;
}

TEST(WorkloadPlan, SameSeedSamePlanOtherSeedOtherPlan) {
  const Tokenizer& tok = stories_tokenizer();
  const auto a = plan_workload(busy_spec(7), tok, 512);
  const auto b = plan_workload(busy_spec(7), tok, 512);
  const auto c = plan_workload(busy_spec(8), tok, 512);
  ASSERT_EQ(a.size(), 200u);
  EXPECT_TRUE(same_plan(a, b));
  EXPECT_FALSE(same_plan(a, c));
  int same_prompts = 0;
  for (size_t i = 0; i < a.size(); ++i) same_prompts += a[i].prompt == c[i].prompt;
  EXPECT_LT(same_prompts, 5);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].index, static_cast<int32_t>(i));
}

// Pinned values: a change to how draws are made (which would silently change
// every recorded experiment) must show up here and be deliberate.
TEST(WorkloadPlan, DrawsArePinned) {
  const auto plan = plan_workload(busy_spec(7), stories_tokenizer(), 512);
  std::vector<int32_t> lengths;
  for (size_t i = 0; i < 6; ++i) lengths.push_back(static_cast<int32_t>(plan[i].prompt.size()));
  std::vector<int32_t> outputs;
  for (size_t i = 0; i < 6; ++i) outputs.push_back(plan[i].max_new_tokens);
  std::vector<int32_t> groups;
  for (size_t i = 0; i < 6; ++i) groups.push_back(plan[i].prefix_group);
  std::vector<int32_t> batch;
  for (size_t i = 0; i < 6; ++i) batch.push_back(plan[i].priority == Priority::batch);
  // Recorded from this implementation (mt19937_64 streams, see seeded_random.hpp).
  EXPECT_EQ(lengths, (std::vector<int32_t>{9, 7, 23, 36, 19, 10}));
  EXPECT_EQ(outputs, (std::vector<int32_t>{12, 14, 29, 13, 41, 14}));
  EXPECT_EQ(groups, (std::vector<int32_t>{-1, -1, 1, 1, -1, -1}));
  EXPECT_EQ(batch, (std::vector<int32_t>{1, 0, 1, 0, 0, 0}));
  EXPECT_EQ(std::vector<int32_t>(plan[0].prompt.begin(), plan[0].prompt.begin() + 4),
            (std::vector<int32_t>{1, 157, 117, 40}));
  EXPECT_NEAR(plan[0].arrival_s, 1.7371180475575381, 1e-12);  // libm may differ in the last bits
}

TEST(WorkloadPlan, PoissonGapsHaveMeanAndVarianceOfTheRate) {
  const double rate = 4.0;
  const auto plan = plan_workload(poisson(rate, 20000), stories_tokenizer(), 512);
  std::vector<double> gaps;
  double prev = 0;
  for (const PlannedRequest& r : plan) {
    gaps.push_back(r.arrival_s - prev);
    prev = r.arrival_s;
  }
  EXPECT_GT(gaps[0], 0);  // the first request waits its gap too
  EXPECT_TRUE(std::all_of(gaps.begin(), gaps.end(), [](double g) { return g >= 0; }));
  EXPECT_NEAR(mean_of(gaps), 1 / rate, 0.02 / rate);
  EXPECT_NEAR(variance_of(gaps), 1 / (rate * rate), 0.08 / (rate * rate));
}

TEST(WorkloadPlan, ARateSweepOnlyStretchesTheTimeline) {
  const auto slow = plan_workload(poisson(2.0, 50), stories_tokenizer(), 512);
  const auto fast = plan_workload(poisson(8.0, 50), stories_tokenizer(), 512);
  for (size_t i = 0; i < slow.size(); ++i) {
    EXPECT_NEAR(slow[i].arrival_s, 4 * fast[i].arrival_s, 1e-9);
    EXPECT_EQ(slow[i].prompt, fast[i].prompt);
  }
}

TEST(WorkloadPlan, AShortPlanIsTheStartOfALongOne) {
  WorkloadSpec w = busy_spec(3);
  w.n_requests = 20;
  const auto shorter = plan_workload(w, stories_tokenizer(), 512);
  w.n_requests = 120;
  auto longer = plan_workload(w, stories_tokenizer(), 512);
  longer.resize(20);
  EXPECT_TRUE(same_plan(shorter, longer));
}

TEST(WorkloadPlan, ConcurrencyStartsEveryRequestAtZero) {
  WorkloadSpec w = poisson(1, 30);
  w.arrival = {.kind = ArrivalSpec::Kind::concurrency, .clients = 8};
  const auto plan = plan_workload(w, stories_tokenizer(), 512);
  ASSERT_EQ(plan.size(), 30u);
  for (const PlannedRequest& r : plan) EXPECT_EQ(r.arrival_s, 0);
}

TEST(WorkloadPlan, FixedLengthsAndRandomPromptsOfOrdinaryTokens) {
  const Tokenizer& tok = stories_tokenizer();
  ASSERT_TRUE(tok.vocab().add_bos);
  WorkloadSpec w = poisson(1, 300);
  w.prompt_tokens = {.kind = LengthDist::Kind::fixed, .value = 20};
  w.output_tokens = {.kind = LengthDist::Kind::fixed, .value = 7};
  std::set<int32_t> seen;
  for (const PlannedRequest& r : plan_workload(w, tok, 512)) {
    ASSERT_EQ(r.prompt.size(), 20u);  // BOS counts
    EXPECT_EQ(r.prompt[0], tok.bos());
    for (size_t i = 1; i < r.prompt.size(); ++i) {
      EXPECT_FALSE(tok.is_special(r.prompt[i])) << r.prompt[i];
      seen.insert(r.prompt[i]);
    }
    EXPECT_EQ(r.max_new_tokens, 7);
    EXPECT_EQ(r.prefix_group, -1);
    EXPECT_EQ(r.priority, Priority::interactive);
  }
  // 300 * 19 draws over 509 ordinary ids: nearly all of them turn up.
  EXPECT_GT(seen.size(), 480u);
}

TEST(WorkloadPlan, UniformLengthsCoverTheRange) {
  WorkloadSpec w = poisson(1, 2000);
  w.prompt_tokens = {.kind = LengthDist::Kind::uniform, .min = 3, .max = 9};
  w.output_tokens = {.kind = LengthDist::Kind::uniform, .min = 1, .max = 4};
  std::set<size_t> prompt_lengths;
  std::set<int32_t> output_lengths_seen;
  for (const PlannedRequest& r : plan_workload(w, stories_tokenizer(), 512)) {
    prompt_lengths.insert(r.prompt.size());
    output_lengths_seen.insert(r.max_new_tokens);
  }
  EXPECT_EQ(prompt_lengths, (std::set<size_t>{3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(output_lengths_seen, (std::set<int32_t>{1, 2, 3, 4}));
}

TEST(WorkloadPlan, NormalLengthsAreClampedToMinAndMax) {
  WorkloadSpec w = poisson(1, 2000);
  w.output_tokens = {.kind = LengthDist::Kind::normal, .mean = 30, .stddev = 40, .min = 5, .max = 60};
  const std::vector<double> v = output_lengths(plan_workload(w, stories_tokenizer(), 512));
  EXPECT_EQ(*std::min_element(v.begin(), v.end()), 5);
  EXPECT_EQ(*std::max_element(v.begin(), v.end()), 60);
  // Unclamped: mean 30 and stddev 4 over 20000 draws.
  w.n_requests = 20000;
  w.output_tokens = {.kind = LengthDist::Kind::normal, .mean = 30, .stddev = 4, .min = 1, .max = 1000};
  const std::vector<double> u = output_lengths(plan_workload(w, stories_tokenizer(), 512));
  EXPECT_NEAR(mean_of(u), 30, 0.15);
  EXPECT_NEAR(std::sqrt(variance_of(u)), 4, 0.15);  // rounding adds 1/12 to the variance
}

TEST(WorkloadPlan, LognormalLengthsHaveTheAskedMeanAndStddev) {
  WorkloadSpec w = poisson(1, 20000);
  w.output_tokens = {.kind = LengthDist::Kind::lognormal, .mean = 64, .stddev = 32, .min = 1, .max = 100000};
  const std::vector<double> v = output_lengths(plan_workload(w, stories_tokenizer(), 512));
  EXPECT_NEAR(mean_of(v), 64, 64 * 0.02);
  EXPECT_NEAR(std::sqrt(variance_of(v)), 32, 32 * 0.05);
  // Skewed right, as a lognormal is: the median sits below the mean.
  std::vector<double> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_LT(sorted[sorted.size() / 2], 62);
}

TEST(WorkloadPlan, SharedPrefixesAreSharedByTheAskedFraction) {
  const Tokenizer& tok = stories_tokenizer();
  WorkloadSpec w = poisson(1, 4000);
  w.prompt_tokens = {.kind = LengthDist::Kind::uniform, .min = 50, .max = 150};
  w.shared_prefix_fraction = 0.7;
  w.prefix_tokens = 96;
  w.prefix_groups = 2;
  const auto plan = plan_workload(w, tok, 512);

  // The two prefixes: taken from the first request of each group.
  std::vector<std::vector<int32_t>> prefix(2);
  for (const PlannedRequest& r : plan) {
    if (r.prefix_group >= 0 && prefix[static_cast<size_t>(r.prefix_group)].empty()) {
      prefix[static_cast<size_t>(r.prefix_group)].assign(r.prompt.begin(), r.prompt.begin() + 96);
    }
  }
  ASSERT_FALSE(prefix[0].empty());
  ASSERT_FALSE(prefix[1].empty());
  EXPECT_NE(prefix[0], prefix[1]);
  EXPECT_EQ(prefix[0][0], tok.bos());

  int n_prefixed = 0;
  int n_group0 = 0;
  for (const PlannedRequest& r : plan) {
    if (r.prefix_group < 0) {
      if (r.prompt.size() >= prefix[0].size()) {
        EXPECT_FALSE(std::equal(prefix[0].begin(), prefix[0].end(), r.prompt.begin()));
      }
      EXPECT_GE(r.prompt.size(), 50u);
      continue;
    }
    ++n_prefixed;
    n_group0 += r.prefix_group == 0;
    const std::vector<int32_t>& p = prefix[static_cast<size_t>(r.prefix_group)];
    ASSERT_GE(r.prompt.size(), 97u);  // the prefix and at least one token of its own
    EXPECT_LE(r.prompt.size(), 150u);
    EXPECT_TRUE(std::equal(p.begin(), p.end(), r.prompt.begin())) << "request " << r.index;
  }
  EXPECT_NEAR(n_prefixed / 4000.0, 0.7, 0.03);
  EXPECT_NEAR(static_cast<double>(n_group0) / n_prefixed, 0.5, 0.04);
}

TEST(WorkloadPlan, BatchShareFollowsThePriorityMix) {
  WorkloadSpec w = poisson(1, 4000);
  w.batch_fraction = 0.25;
  int n_batch = 0;
  for (const PlannedRequest& r : plan_workload(w, stories_tokenizer(), 512)) n_batch += r.priority == Priority::batch;
  EXPECT_NEAR(n_batch / 4000.0, 0.25, 0.025);
  w.batch_fraction = 1;
  for (const PlannedRequest& r : plan_workload(w, stories_tokenizer(), 512)) EXPECT_EQ(r.priority, Priority::batch);
}

TEST(WorkloadPlan, PromptsNeverExceedTheCap) {
  WorkloadSpec w = poisson(1, 500);
  w.prompt_tokens = {.kind = LengthDist::Kind::uniform, .min = 1, .max = 300};
  w.shared_prefix_fraction = 0.3;
  w.prefix_tokens = 40;
  size_t longest = 0;
  for (const PlannedRequest& r : plan_workload(w, stories_tokenizer(), 100)) {
    EXPECT_LE(r.prompt.size(), 100u);
    longest = std::max(longest, r.prompt.size());
  }
  EXPECT_EQ(longest, 100u);
}

TEST(WorkloadPlan, TracesGiveArrivalsAndPrompts) {
  const Tokenizer& tok = stories_tokenizer();
  const auto dir = temp_dir();
  write_file(dir / "t.jsonl",
             "{\"t\": 0.0, \"prompt_tokens\": 50, \"output_tokens\": 20}\n"
             "{\"t\": 0.25, \"prompt\": \"Once upon a time, there was a dog\", \"output_tokens\": 5}\n"
             "{\"t\": 0.25, \"priority\": \"batch\"}\n"
             "{\"t\": 1.5, \"prompt_tokens\": 9}\n");
  const std::string wl = write_file(dir / "w.json", R"({"arrival": {"type": "trace", "file": "t.jsonl"},
      "output_tokens": 11, "prompt_tokens": 30})");
  const WorkloadSpec w = load_workload(wl);
  const auto plan = plan_workload(w, tok, 512);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].arrival_s, 0.0);
  EXPECT_EQ(plan[0].prompt.size(), 50u);
  EXPECT_EQ(plan[0].max_new_tokens, 20);
  EXPECT_EQ(plan[1].arrival_s, 0.25);
  EXPECT_EQ(plan[1].prompt, tok.encode("Once upon a time, there was a dog", true, false));
  EXPECT_EQ(plan[1].max_new_tokens, 5);
  EXPECT_EQ(plan[2].prompt.size(), 30u);  // the line leaves both lengths to the spec
  EXPECT_EQ(plan[2].max_new_tokens, 11);
  EXPECT_EQ(plan[2].priority, Priority::batch);
  EXPECT_EQ(plan[3].arrival_s, 1.5);
  EXPECT_EQ(plan[3].prompt.size(), 9u);

  WorkloadSpec first_two = w;
  first_two.n_requests = 2;
  EXPECT_EQ(plan_workload(first_two, tok, 512).size(), 2u);
  // The cap cuts a recorded prompt too.
  for (const PlannedRequest& r : plan_workload(w, tok, 8)) EXPECT_LE(r.prompt.size(), 8u);
}

TEST(WorkloadPlan, DatasetPromptsAreEncodedAndCut) {
  const Tokenizer& tok = stories_tokenizer();
  const auto dir = temp_dir();
  const std::vector<std::string> texts = {"The little dog ran to the park.", "Lily had a red ball and a big blue hat.",
                                          "Tom and Sue went to the sea."};
  std::string lines;
  for (const std::string& t : texts) lines += "{\"prompt\": \"" + t + "\"}\n";
  WorkloadSpec w = poisson(1, 300);
  w.prompts_path = write_file(dir / "p.jsonl", lines);
  w.prompt_tokens = {.kind = LengthDist::Kind::fixed, .value = 12};  // the cap of each prompt
  std::set<std::vector<int32_t>> distinct;
  for (const PlannedRequest& r : plan_workload(w, tok, 512)) {
    bool from_dataset = false;
    for (const std::string& t : texts) {
      std::vector<int32_t> ids = tok.encode(t, true, false);
      if (ids.size() > 12) ids.resize(12);
      from_dataset = from_dataset || ids == r.prompt;
    }
    EXPECT_TRUE(from_dataset) << "request " << r.index;
    distinct.insert(r.prompt);
  }
  EXPECT_EQ(distinct.size(), 3u);  // all three drawn
}

TEST(WorkloadPlan, DatasetPromptsFollowASharedPrefix) {
  const Tokenizer& tok = stories_tokenizer();
  const auto dir = temp_dir();
  WorkloadSpec w = poisson(1, 50);
  w.prompts_path = write_file(dir / "p.jsonl", "{\"prompt\": \"A cat sat.\"}\n");
  w.prompt_tokens = {.kind = LengthDist::Kind::fixed, .value = 100};
  w.shared_prefix_fraction = 1;
  w.prefix_tokens = 10;
  const std::vector<int32_t> text = tok.encode("A cat sat.", false, false);
  for (const PlannedRequest& r : plan_workload(w, tok, 512)) {
    ASSERT_EQ(r.prefix_group, 0);
    ASSERT_EQ(r.prompt.size(), 10 + text.size());
    EXPECT_TRUE(std::equal(text.begin(), text.end(), r.prompt.begin() + 10));  // no second BOS
  }
}

// The Llama 2 tokenizer (32000 tokens, from tokenizer.json): random prompts
// skip its three special tokens, and dataset prompts encode as it does.
TEST(WorkloadPlan, RealLlama2Tokenizer) {
  const Tokenizer& tok = test::llama2_tokenizer();
  ASSERT_EQ(tok.n_vocab(), 32000);
  ASSERT_EQ(tok.bos(), 1);
  WorkloadSpec w = poisson(1, 200);
  w.prompt_tokens = {.kind = LengthDist::Kind::uniform, .min = 2, .max = 64};
  for (const PlannedRequest& r : plan_workload(w, tok, 512)) {
    ASSERT_GE(r.prompt.size(), 2u);
    EXPECT_EQ(r.prompt[0], 1);
    for (size_t i = 1; i < r.prompt.size(); ++i) EXPECT_GT(r.prompt[i], 2);  // <unk> <s> </s>
  }
  const auto dir = temp_dir();
  w.prompts_path = write_file(dir / "p.jsonl", "{\"prompt\": \"Explain how a transformer works, briefly.\"}\n");
  w.prompt_tokens = {.kind = LengthDist::Kind::fixed, .value = 64};
  const std::vector<int32_t> expected = tok.encode("Explain how a transformer works, briefly.", true, false);
  for (const PlannedRequest& r : plan_workload(w, tok, 512)) EXPECT_EQ(r.prompt, expected);
  for (const PlannedRequest& r : plan_workload(w, tok, 4)) {
    EXPECT_EQ(r.prompt, std::vector<int32_t>(expected.begin(), expected.begin() + 4));
  }
}

TEST(WorkloadPlan, ImpossibleSpecsAreErrors) {
  const Tokenizer& tok = stories_tokenizer();
  WorkloadSpec w = poisson(1, 10);
  w.shared_prefix_fraction = 0.5;
  w.prefix_tokens = 100;
  try {
    plan_workload(w, tok, 100);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("shared_prefix.tokens (100)"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(plan_workload(w, tok, 101));
  EXPECT_THROW(plan_workload(poisson(1, 10), tok, 0), Error);
  EXPECT_THROW(plan_workload(poisson(0, 10), tok, 512), Error);
  EXPECT_THROW(plan_workload(poisson(1, 0), tok, 512), Error);
  WorkloadSpec missing = poisson(1, 10);
  missing.arrival = {.kind = ArrivalSpec::Kind::trace, .trace_path = "/nonexistent/trace.jsonl"};
  try {
    plan_workload(missing, tok, 512);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
  }
}

}  // namespace
}  // namespace troupe
