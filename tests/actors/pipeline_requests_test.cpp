// One request's fate through the actor pipeline: errors reach that request
// only (prompt too long, KV can never hold it, bad parameters, bad token
// ids, text that is not UTF-8), stop strings end a request without emitting
// them, text prompts go through the tokenizer pool, logprobs match a direct
// log-softmax, custom sampler and observer actors plug in, and tearing a
// busy pipeline down ends every request and never hangs.
#include <gtest/gtest.h>

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <atomic>
#include <set>
#include <cmath>
#include <thread>

#include "actors/pipeline_extensions.hpp"
#include "pipeline_test_util.hpp"

namespace troupe {
namespace {

using test::Case;
using test::greedy;

std::vector<int32_t> prompt_of(const std::string& text) { return test::stories_tokenizer().encode(text, true, false); }

TEST(PipelineErrors, EachErrorReachesOnlyItsRequest) {
  auto p = Pipeline::start(test::stories_config(test::split(2)));
  const std::vector<int32_t> good = prompt_of("Once upon a time");
  const std::vector<int32_t> expected = test::reference(good, 24);

  std::vector<int32_t> too_long;
  while (too_long.size() < 2100)  // past the model's context (2048)
    too_long.insert(too_long.end(), good.begin(), good.end());
  GenerateParams bad_params = greedy(8);
  bad_params.sampling.top_p = 2.0f;
  GenerateParams bad_stop = greedy(8);
  bad_stop.stop = {""};
  GenerateParams bad_budget = greedy(8);
  bad_budget.thinking_budget = -2;

  auto ok1 = p->generate(good, greedy(24));
  auto e_long = p->generate(too_long, greedy(8));
  auto e_params = p->generate(good, bad_params);
  auto e_token = p->generate(std::vector<int32_t>{1, 100, 512}, greedy(8));  // 512 == n_vocab
  auto e_empty = p->generate(std::vector<int32_t>{}, greedy(8));
  auto e_stop = p->generate(good, bad_stop);
  auto e_budget = p->generate(good, bad_budget);
  auto e_utf8 = p->generate(TextPrompt{.text = "bad \xff text"}, greedy(8));
  auto ok2 = p->generate(good, greedy(24));

  // Each refused at the front door with its rule's code and the field at
  // fault, before it took a queue slot.
  struct Expect {
    const char* name;
    std::future<Completion>* run;
    Errc code;
    const char* param;
  };
  const Expect expects[] = {{"too long", &e_long, Errc::too_long, "prompt"},
                            {"bad top_p", &e_params, Errc::invalid_argument, "top_p"},
                            {"token id", &e_token, Errc::invalid_argument, "prompt[2]"},
                            {"empty", &e_empty, Errc::invalid_argument, "prompt"},
                            {"empty stop", &e_stop, Errc::invalid_argument, "stop[0]"},
                            {"thinking budget", &e_budget, Errc::invalid_argument, "thinking.budget_tokens"},
                            {"not UTF-8", &e_utf8, Errc::invalid_argument, "prompt"}};
  for (const Expect& x : expects) {
    const Completion c = test::wait_for(*x.run);
    SCOPED_TRACE(x.name);
    EXPECT_EQ(c.final.reason, EndReason::error) << c.final.error_message;
    EXPECT_EQ(c.final.error_code, x.code) << c.final.error_message;
    EXPECT_EQ(c.final.error_param, x.param) << c.final.error_message;
    EXPECT_FALSE(c.final.error_message.empty());
    EXPECT_TRUE(c.tokens.empty());
  }
  EXPECT_EQ(test::ids_of(test::wait_for(ok1)), expected);
  EXPECT_EQ(test::ids_of(test::wait_for(ok2)), expected);
  // Every refusal at the front door counts, the text that cannot be tokenized too.
  EXPECT_EQ(p->stats().rejected, 7u);
  EXPECT_EQ(p->kv_snapshot().n_used, 0);
}

TEST(PipelineErrors, PromptTheKvCanNeverHoldIsTooLong) {
  PipelineConfig cfg = test::stories_config(test::split(1));
  cfg.n_kv_blocks = 8;  // 128 tokens in all
  auto p = Pipeline::start(cfg);
  std::vector<int32_t> long_prompt = prompt_of("Once upon a time");
  while (long_prompt.size() < 200) long_prompt.push_back(long_prompt[long_prompt.size() % 5 + 1]);
  const std::vector<int32_t> good = prompt_of("The little dog");
  auto bad = p->generate(long_prompt, greedy(8));
  auto fine = p->generate(good, greedy(16));
  const Completion b = test::wait_for(bad);
  EXPECT_EQ(b.final.reason, EndReason::error);
  // The context is capped at what the KV pool can hold at all: refused at
  // the front door, before it takes a queue slot.
  EXPECT_EQ(b.final.error_code, Errc::too_long) << b.final.error_message;
  EXPECT_EQ(b.final.error_param, "prompt");
  EXPECT_EQ(p->model_info().context_length, 128);
  EXPECT_EQ(test::ids_of(test::wait_for(fine)), test::reference(good, 16));
}

TEST(PipelineStop, StopStringEndsTheRequestAndIsNotEmitted) {
  auto p = Pipeline::start(test::stories_config(test::split(3)));
  const std::vector<int32_t> prompt = prompt_of("Once upon a time");
  const std::vector<int32_t> ref = test::reference(prompt, 80);
  const std::string full = test::continuation_text(prompt, ref);
  ASSERT_GT(full.size(), 60u);
  // A stop string from the middle of the reference text, and one that never occurs.
  const std::string stop = full.substr(40, 6);
  GenerateParams params = greedy(80);
  params.stop = {"never in a story", stop};
  auto run = p->generate(prompt, params);
  const Completion c = test::wait_for(run);
  EXPECT_EQ(c.final.reason, EndReason::stop);
  EXPECT_EQ(c.final.stop_string, stop);
  EXPECT_EQ(c.text, full.substr(0, full.find(stop)));
  EXPECT_LT(c.tokens.size(), ref.size());
  // The tokens streamed are the reference's, up to the one completing the stop.
  const std::vector<int32_t> ids = test::ids_of(c);
  EXPECT_TRUE(std::equal(ids.begin(), ids.end(), ref.begin()));
  const KvSnapshot kv = p->kv_snapshot();  // the scheduler freed it
  EXPECT_TRUE(kv.sequences.empty());
  EXPECT_EQ(kv.n_used, 0);
}

TEST(PipelineStop, UnmatchedStopStringsReleaseAllText) {
  auto p = Pipeline::start(test::stories_config(test::split(1)));
  const std::vector<int32_t> prompt = prompt_of("Lily had a red ball");
  const std::vector<int32_t> ref = test::reference(prompt, 40);
  GenerateParams params = greedy(40);
  params.stop = {"xyzzy", "Lily zz"};  // prefixes of these ("L", "Lily") are held back, then released
  auto run = p->generate(prompt, params);
  const Completion c = test::wait_for(run);
  EXPECT_EQ(test::ids_of(c), ref);
  EXPECT_EQ(c.text, test::continuation_text(prompt, ref));
  EXPECT_TRUE(c.final.stop_string.empty());
}

TEST(PipelineText, TextPromptsMatchTokenPrompts) {
  PipelineConfig cfg = test::stories_config(test::split(2));
  cfg.tokenizer_pool = 2;
  auto p = Pipeline::start(cfg);
  const char* texts[] = {"Once upon a time", "The sun was hot", "A big fish swam", "Ben and his mom"};
  std::vector<std::future<Completion>> runs;
  for (const char* t : texts) runs.push_back(p->generate(TextPrompt{.text = t}, greedy(20)));
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::vector<int32_t> prompt = prompt_of(texts[i]);
    const Completion c = test::wait_for(runs[i]);
    EXPECT_EQ(test::ids_of(c), test::reference(prompt, 20));
    EXPECT_EQ(c.final.prompt_tokens, static_cast<int32_t>(prompt.size()));
    EXPECT_EQ(c.text, test::continuation_text(prompt, test::reference(prompt, 20)));
    EXPECT_GE(c.final.total_seconds, c.final.first_token_seconds);
    EXPECT_GE(c.final.first_token_seconds, c.final.queue_seconds);
  }
}

TEST(PipelineText, BosOnlyPromptStartsTheStory) {
  // The published greedy output of stories260K from BOS alone (its README).
  auto p = Pipeline::start(test::stories_config(test::split(1)));
  auto run = p->generate(TextPrompt{.text = ""}, greedy(30));
  const Completion c = test::wait_for(run);
  EXPECT_EQ(c.text.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << c.text;
}

TEST(PipelineLogprobs, MatchLogSoftmaxOfTheModel) {
  auto p = Pipeline::start(test::stories_config(test::split(2)));
  const std::vector<int32_t> prompt = prompt_of("Tom and Sue went to the park");
  GenerateParams params = greedy(1);
  params.sampling.logprobs = true;
  params.sampling.n_logprobs = 3;
  auto run = p->generate(prompt, params);
  const Completion c = test::wait_for(run);
  ASSERT_EQ(c.tokens.size(), 1u);

  CpuBackend backend({.n_threads = 1});
  Generator gen(test::stories_model(), backend);
  const std::vector<float> logits = gen.prompt_logits(prompt);
  double sum = 0;
  const float max = *std::max_element(logits.begin(), logits.end());
  for (const float l : logits) sum += std::exp(static_cast<double>(l - max));
  auto logprob = [&](int32_t t) { return static_cast<double>(logits[static_cast<size_t>(t)] - max) - std::log(sum); };
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
  });

  const TokenEvent& e = c.tokens[0];
  EXPECT_EQ(e.token, order[0]);
  EXPECT_NEAR(e.logprob, logprob(e.token), 1e-4);
  ASSERT_EQ(e.top_logprobs.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(e.top_logprobs[k].token, order[k]);
    EXPECT_NEAR(e.top_logprobs[k].logprob, logprob(order[k]), 1e-4);
  }
}

TEST(PipelineLength, IgnoreEosRunsToMaxNewTokens) {
  auto p = Pipeline::start(test::stories_config(test::split(1)));
  const std::vector<int32_t> prompt = prompt_of("One day, a bird");
  GenerateParams params = greedy(150);
  params.ignore_eos = true;
  auto run = p->generate(prompt, params);
  const Completion c = test::wait_for(run);
  EXPECT_EQ(c.final.reason, EndReason::length);
  EXPECT_EQ(c.final.completion_tokens, 150);
  EXPECT_EQ(test::ids_of(c), test::reference(prompt, 150, true));
}

// A custom sampler actor: greedy, written against the sampler interface only.
// (It takes an argument: CAF 0.17's spawn of a function without arguments
// binds a reference to a null pointer, which UBSan reports.)
sampler_actor::behavior_type argmax_sampler(sampler_actor::stateful_pointer<std::set<RequestId>> self,
                                            const Tokenizer* tokenizer) {
  return {
      [self](SeqOpen& o) { self->state.insert(o.id); },
      [self](SeqClose& c) { self->state.erase(c.id); },
      [self, tokenizer](StepLogits& in) -> SampledStep {
        SampledStep out{.step = in.step, .engine = in.engine};
        for (size_t r = 0; r < in.rows.size(); ++r) {
          SampledToken t{.id = in.rows[r]};  // skipped unless the request is known
          if (self->state.count(t.id) != 0) {
            const float* row = in.logits->row(static_cast<int64_t>(r));
            const auto best = static_cast<int32_t>(std::max_element(row, row + in.logits->cols) - row);
            t = SampledToken::chosen(t.id, best, tokenizer->is_eog(best));
          }
          out.tokens.push_back(t);
        }
        return out;
      },
  };
}

struct Seen {
  std::atomic<int> prompts{0};
  std::atomic<int> tokens{0};
  std::atomic<int> finals{0};
};

observer_actor::behavior_type counting_observer(observer_actor::pointer, std::shared_ptr<Seen> seen) {
  return {
      [seen](const PromptEvent&) { ++seen->prompts; },
      [seen](const TokenEvent&) { ++seen->tokens; },
      [seen](const FinalEvent&) { ++seen->finals; },
  };
}

TEST(PipelineExtensionsTest, CustomSamplerAndObserver) {
  auto seen = std::make_shared<Seen>();
  PipelineExtensions ext;
  ext.make_sampler = [](caf::actor_system& sys, const std::shared_ptr<const Model>&) {
    return sys.spawn(argmax_sampler, &test::stories_tokenizer());
  };
  ext.observers.push_back([seen](caf::actor_system& sys) { return sys.spawn(counting_observer, seen); });
  int total = 0;
  {
    auto p = Pipeline::start(test::stories_config(test::split(2)), ext);
    const std::vector<Case> cases = test::make_cases(6);
    std::vector<std::future<Completion>> runs;
    for (const auto& c : cases) runs.push_back(p->generate(c.prompt, greedy(c.max_new_tokens)));
    for (size_t i = 0; i < runs.size(); ++i) {
      const Completion c = test::wait_for(runs[i]);
      EXPECT_EQ(test::ids_of(c), cases[i].expected) << c.final.error_message;
      total += static_cast<int>(c.tokens.size());
    }
  }  // the pipeline is gone: every observer message was handled
  EXPECT_EQ(seen->tokens.load(), total);
  EXPECT_EQ(seen->finals.load(), 6);
}

TEST(PipelineTeardown, BusyPipelineEndsEveryRequestAndNeverHangs) {
  auto finals = std::make_shared<std::atomic<int>>(0);
  auto cancelled = std::make_shared<std::atomic<int>>(0);
  const auto t0 = std::chrono::steady_clock::now();
  {
    auto p = Pipeline::start(test::stories_config(test::split(3)));
    GenerateParams params = greedy(400);
    params.ignore_eos = true;
    for (int i = 0; i < 16; ++i) {
      p->submit(i % 2 == 0 ? std::vector<int32_t>{1, 403, 407} : prompt_of("The little dog"), params,
                {.on_final = [finals, cancelled](const FinalEvent& f) {
                   ++*finals;
                   if (f.reason == EndReason::cancelled) ++*cancelled;
                 }});
    }
    p->submit(TextPrompt{.text = "Once upon a time"}, params, {.on_final = [finals](const FinalEvent&) { ++*finals; }});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(finals->load(), 17);
  EXPECT_GT(cancelled->load(), 0);
  EXPECT_LT(seconds, 20.0);
}

TEST(PipelineCancel, BeforeAdmissionAndUnknownIds) {
  PipelineConfig cfg = test::stories_config(test::split(1));
  cfg.scheduler.max_batch_size = 1;  // one at a time: the second waits
  auto p = Pipeline::start(cfg);
  GenerateParams params = greedy(200);
  params.ignore_eos = true;
  auto first = p->generate(prompt_of("Once upon a time"), params);
  std::promise<FinalEvent> second_final;
  const RequestId second = p->submit(prompt_of("The sun was hot"), greedy(10),
                                     {.on_final = [&](const FinalEvent& f) { second_final.set_value(f); }});
  p->cancel(second);
  p->cancel(second);      // twice: ignored
  p->cancel(123456789);  // unknown: ignored
  auto f = second_final.get_future();
  const FinalEvent fe = test::wait_for(f);
  EXPECT_EQ(fe.reason, EndReason::cancelled);
  EXPECT_EQ(fe.completion_tokens, 0);
  EXPECT_EQ(test::wait_for(first).final.reason, EndReason::length);
}

TEST(PipelineBatching, MaxWaitWakesTheScheduler) {
  // An idle engine waits for min_batch_size requests, but at most max_wait:
  // a lone request must still run, woken by the scheduler's delayed_send.
  PipelineConfig cfg = test::stories_config(test::split(1));
  cfg.scheduler.min_batch_size = 4;
  cfg.scheduler.max_wait = std::chrono::milliseconds(60);
  auto p = Pipeline::start(cfg);
  const std::vector<int32_t> prompt = prompt_of("A big fish swam");
  auto run = p->generate(prompt, greedy(8));
  const Completion c = test::wait_for(run);
  EXPECT_EQ(test::ids_of(c), test::reference(prompt, 8));
  EXPECT_GE(c.final.queue_seconds, 0.055);
  EXPECT_LT(c.final.queue_seconds, 5.0);
}

TEST(PipelineConfigErrors, StagesMustCoverTheLayers) {
  EXPECT_THROW(Pipeline::start(test::stories_config({{.first_layer = 0, .last_layer = 2}})), Error);
  EXPECT_THROW(Pipeline::start(test::stories_config({{.first_layer = 1, .last_layer = -1}})), Error);
  EXPECT_THROW(Pipeline::start(test::stories_config({{.first_layer = 0, .last_layer = 3}, {.first_layer = 2}})),
               Error);
  PipelineConfig bad = test::stories_config(test::split(1));
  bad.scheduler.max_batch_size = 0;
  EXPECT_THROW(Pipeline::start(bad), Error);
  EXPECT_THROW(Pipeline::start(PipelineConfig{.model_path = "/nonexistent.gguf"}), Error);
}

}  // namespace
}  // namespace troupe
