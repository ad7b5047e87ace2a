// The in-process load driver (see inprocess_runner.hpp). Callbacks run on
// the detokenizer's thread and only stamp times under a mutex; a driver
// thread (the caller's) submits, so a slow callback never delays arrivals.
#include "experiments/inprocess_runner.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace troupe {
namespace {

using Clock = std::chrono::steady_clock;

struct RunState {
  Clock::time_point t0;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<RequestRecord> records;
  std::vector<RequestId> ids;
  int32_t ended = 0;

  double now() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }
};

}  // namespace

std::vector<RequestRecord> run_in_process(Pipeline& pipeline, const std::vector<PlannedRequest>& plan,
                                          const LoadOptions& options) {
  auto st = std::make_shared<RunState>();
  st->records.resize(plan.size());
  st->ids.assign(plan.size(), 0);
  st->t0 = Clock::now();
  const int32_t n = static_cast<int32_t>(plan.size());

  auto submit = [&](int32_t i) {
    const PlannedRequest& r = plan[static_cast<size_t>(i)];
    GenerateParams params{.max_new_tokens = r.max_new_tokens, .priority = r.priority, .ignore_eos = options.ignore_eos};
    params.sampling.temperature = options.temperature;
    params.sampling.seed = static_cast<uint64_t>(i) + 1;
    {
      std::lock_guard lock(st->mu);
      RequestRecord& rec = st->records[static_cast<size_t>(i)];
      rec.index = r.index;
      rec.scheduled_s = r.arrival_s;
      rec.sent_s = st->now();
      rec.prompt_tokens = static_cast<int32_t>(r.prompt.size());
    }
    RequestCallbacks cb{.on_token =
                            [st, i](const TokenEvent&) {
                              std::lock_guard lock(st->mu);
                              RequestRecord& rec = st->records[static_cast<size_t>(i)];
                              const double t = st->now();
                              if (rec.first_token_s < 0) rec.first_token_s = t;
                              rec.token_s.push_back(t);
                            },
                        .on_final =
                            [st, i](const FinalEvent& f) {
                              std::lock_guard lock(st->mu);
                              RequestRecord& rec = st->records[static_cast<size_t>(i)];
                              rec.end_s = st->now();
                              rec.queue_s = f.queue_seconds;
                              rec.output_tokens = f.completion_tokens;
                              rec.prompt_tokens = f.prompt_tokens > 0 ? f.prompt_tokens : rec.prompt_tokens;
                              rec.ok = f.reason == EndReason::stop || f.reason == EndReason::length;
                              if (!rec.ok) rec.error = std::string(to_string(f.reason)) + ": " + f.error_message;
                              ++st->ended;
                              st->cv.notify_all();
                            }};
    const RequestId id = pipeline.submit(r.prompt, std::move(params), std::move(cb));
    std::lock_guard lock(st->mu);
    st->ids[static_cast<size_t>(i)] = id;
  };

  const Clock::time_point deadline = st->t0 + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(options.timeout_s));
  if (options.clients > 0) {
    // Closed loop: the next request goes out as soon as one ends.
    int32_t sent = 0;
    for (; sent < std::min(options.clients, n); ++sent) submit(sent);
    std::unique_lock lock(st->mu);
    while (sent < n) {
      if (!st->cv.wait_until(lock, deadline, [&] { return st->ended + options.clients > sent; })) break;
      while (sent < n && st->ended + options.clients > sent) {
        lock.unlock();
        submit(sent++);
        lock.lock();
      }
    }
  } else {
    for (int32_t i = 0; i < n; ++i) {
      const auto at = st->t0 + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(plan[static_cast<size_t>(i)].arrival_s));
      if (at > deadline) break;
      std::this_thread::sleep_until(at);
      submit(i);
    }
  }
  std::unique_lock lock(st->mu);
  if (!st->cv.wait_until(lock, deadline, [&] { return st->ended == n; })) {
    // Out of time: cancel what runs, and wait for their final events (the
    // callbacks hold `st`, but the records are returned by value).
    std::vector<RequestId> running;
    for (int32_t i = 0; i < n; ++i) {
      if (st->ids[static_cast<size_t>(i)] != 0) running.push_back(st->ids[static_cast<size_t>(i)]);
    }
    lock.unlock();
    for (const RequestId id : running) pipeline.cancel(id);
    lock.lock();
    st->cv.wait_for(lock, std::chrono::seconds(10), [&] { return st->ended == n; });
    for (RequestRecord& r : st->records) {
      if (!r.ok && r.error.empty()) r.error = "not finished within the run's timeout";
    }
  }
  return st->records;
}

}  // namespace troupe
