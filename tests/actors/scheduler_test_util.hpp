// Shared helpers of the scheduler policy tests: request construction and a
// fake model that answers a step plan.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "actors/scheduler_policy.hpp"

namespace troupe::test {

inline Clock::time_point at_ms(int64_t ms) {
  return Clock::time_point{} + std::chrono::milliseconds(ms);
}

inline std::vector<int32_t> prompt_tokens(int32_t n, int32_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (seed * 131 + i * 17) % 32000;
  return t;
}

inline Request make_request(int64_t id, int32_t n_prompt, Priority p = Priority::interactive,
                            int64_t arrival_ms = 0, int32_t max_new = 256) {
  return {.id = id,
          .prompt = prompt_tokens(n_prompt, static_cast<int32_t>(id)),
          .max_new_tokens = max_new,
          .priority = p,
          .arrival = at_ms(arrival_ms)};
}

// Answers every entry that needs logits with token_of(request id, position
// of the new token) and finishes nobody.
inline StepResult fake_model(const StepPlan& plan) {
  StepResult r;
  for (const ScheduledSeq& e : plan.seqs) {
    SeqOutput o{.request_id = e.request_id};
    if (e.need_logits) {
      const int32_t pos = e.n_past + static_cast<int32_t>(e.tokens.size());
      o.token = static_cast<int32_t>((e.request_id * 1000 + pos) % 32000);
    }
    r.outputs.push_back(o);
  }
  return r;
}

}  // namespace troupe::test
