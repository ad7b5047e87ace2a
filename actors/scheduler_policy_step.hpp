// SchedulerPolicy's state of the step being planned, shared by its source
// files (scheduler_policy.cpp, scheduler_policy_admit.cpp,
// scheduler_policy_spec.cpp). Internal.
#pragma once

#include <string>

#include "actors/scheduler_policy.hpp"

namespace troupe {

// How the policy's messages, and the scheduler actor's, name a request.
inline std::string req_name(int64_t id) { return "request " + std::to_string(id); }

struct SchedulerPolicy::StepState {
  StepPlan plan;
  Clock::time_point now;
  uint64_t step = 0;            // id this plan gets if it schedules anything
  int32_t budget = 0;           // tokens left in this step
  int32_t reserved_decode = 0;  // of those, kept for decodes not yet scheduled
  int32_t kv_reserve = 0;       // blocks admissions leave to other policies
  bool admissions_open = true;
  bool long_open = true;  // closed once a long request could not be admitted
};

}  // namespace troupe
