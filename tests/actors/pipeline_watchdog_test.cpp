// Failures contained: a pipeline actor that stops (killed, or an exception
// escaping its handler) ends every open request with an error within a
// bounded time, names itself in the pipeline's failure, and later requests
// are refused at once instead of waiting forever.
#include <gtest/gtest.h>

#include <caf/actor_cast.hpp>
#include <caf/actor_registry.hpp>
#include <caf/actor_system.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <atomic>
#include <stdexcept>

#include "actors/interfaces.hpp"
#include "actors/pipeline.hpp"
#include "actors/pipeline_extensions.hpp"
#include "pipeline_test_util.hpp"

namespace troupe {
namespace {

GenerateParams long_run() {
  GenerateParams p;
  p.max_new_tokens = 400;
  p.ignore_eos = true;
  p.sampling.temperature = 0;
  return p;
}

// Every request ends within 10 s with an error naming the actor: internal
// for those it held, unavailable for those submitted after it stopped.
void expect_all_failed(std::vector<std::future<Completion>>& runs, const std::string& actor) {
  int held = 0;
  for (auto& r : runs) {
    ASSERT_EQ(r.wait_for(std::chrono::seconds(10)), std::future_status::ready) << "a request waits forever";
    const Completion c = r.get();
    EXPECT_EQ(c.final.reason, EndReason::error);
    EXPECT_TRUE(c.final.error_code == Errc::internal || c.final.error_code == Errc::unavailable)
        << c.final.error_message;
    held += c.final.error_code == Errc::internal ? 1 : 0;
    EXPECT_NE(c.final.error_message.find(actor), std::string::npos) << c.final.error_message;
  }
  EXPECT_GE(held, 1);
}

void expect_refused_at_once(Pipeline& p) {
  auto late = p.generate(std::vector<int32_t>{1, 403}, long_run());
  ASSERT_EQ(late.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  const Completion c = late.get();
  EXPECT_EQ(c.final.reason, EndReason::error);
  EXPECT_EQ(c.final.error_code, Errc::unavailable) << c.final.error_message;
}

TEST(PipelineWatchdog, KilledSchedulerEndsEveryRequest) {
  auto p = Pipeline::start(test::stories_config(test::split(2)));
  std::vector<std::future<Completion>> runs;
  for (int i = 0; i < 6; ++i) runs.push_back(p->generate(std::vector<int32_t>{1, 403, 407}, long_run()));
  // Let them get going.
  auto probe = p->generate(std::vector<int32_t>{1, 403}, test::greedy(2));
  test::wait_for(probe);
  EXPECT_TRUE(p->failure().empty());

  const caf::strong_actor_ptr scheduler = p->system().registry().get(caf::atom("scheduler"));
  ASSERT_TRUE(scheduler);
  caf::anon_send_exit(caf::actor_cast<caf::actor>(scheduler), caf::exit_reason::kill);

  expect_all_failed(runs, "scheduler");
  EXPECT_NE(p->failure().find("scheduler"), std::string::npos) << p->failure();
  expect_refused_at_once(*p);
}

// A sampler whose handler throws on the first step: the exception stops it.
sampler_actor::behavior_type throwing_sampler(sampler_actor::pointer, int) {
  return {
      [](SeqOpen&) {},
      [](SeqClose&) {},
      [](StepLogits&) -> SampledStep { throw std::logic_error("invariant broken in the test sampler"); },
  };
}

TEST(PipelineWatchdog, ExceptionInAHandlerEndsEveryRequest) {
  PipelineExtensions ext;
  ext.make_sampler = [](caf::actor_system& sys, const std::shared_ptr<const Model>&) {
    return sys.spawn(throwing_sampler, 0);
  };
  auto p = Pipeline::start(test::stories_config(test::split(1)), ext);
  std::vector<std::future<Completion>> runs;
  for (int i = 0; i < 4; ++i) runs.push_back(p->generate(std::vector<int32_t>{1, 403, 407}, long_run()));
  expect_all_failed(runs, "sampler");
  EXPECT_NE(p->failure().find("sampler"), std::string::npos) << p->failure();
  expect_refused_at_once(*p);
}

}  // namespace
}  // namespace troupe
