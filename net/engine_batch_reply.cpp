#include "net/engine_batch_reply.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>

#include "net/api_error.hpp"
#include "net/routes.hpp"

namespace troupe::net {
namespace {

class EngineBatchReply : public AsyncReply, public std::enable_shared_from_this<EngineBatchReply> {
 public:
  EngineBatchReply(ServerCore& core, std::vector<EngineRequest> requests, int32_t slots, std::string route,
                   BatchFinish finish, BatchError error)
      : core_(core),
        requests_(std::move(requests)),
        slots_(slots),
        route_(std::move(route)),
        finish_(std::move(finish)),
        error_(std::move(error)),
        vectors_(requests_.size()),
        ids_(requests_.size(), -1),
        start_(std::chrono::steady_clock::now()) {}

  void start(std::shared_ptr<ReplyWriter> writer) override {
    std::lock_guard lock(mutex_);
    writer_ = std::move(writer);
    while (next_ < requests_.size() && running_ < slots_ && !ended_) submit_locked();
  }

  void cancel() override {
    std::lock_guard lock(mutex_);
    end_locked();
  }

 private:
  // The callbacks run on actor threads, after submit returns (they take
  // the lock submit holds).
  void submit_locked() {
    const size_t i = next_++;
    ++running_;
    std::weak_ptr<EngineBatchReply> self = weak_from_this();
    RequestCallbacks cb{.on_token = {}, .on_final = [self, i](const FinalEvent& f) {
                          if (auto s = self.lock()) s->on_final(i, f);
                        }};
    try {
      ids_[i] = core_.backend().submit(std::move(requests_[i]), std::move(cb));
    } catch (const Error& e) {
      fail_locked(api_error_from(e.code(), e.what()));
    }
  }

  void on_final(size_t i, const FinalEvent& f) {
    std::lock_guard lock(mutex_);
    ids_[i] = -1;
    --running_;
    // Each input is one of the engine's requests, in /metrics as any other.
    core_.metrics().request_started(route_, f.prompt_tokens);
    core_.metrics().request_ended(f);
    if (ended_) return;
    if (f.reason != EndReason::stop || f.embedding.empty()) {
      const bool cancelled = f.reason == EndReason::cancelled;
      fail_locked(f.reason == EndReason::error || cancelled
                      ? api_error_from(cancelled ? Errc::unavailable : f.error_code, f.error_message, f.error_param)
                      : ApiError(500, "the engine ended input " + std::to_string(i) + " without its output", {},
                                 "internal_error"));
      return;
    }
    if (!std::all_of(f.embedding.begin(), f.embedding.end(), [](float x) { return std::isfinite(x); })) {
      fail_locked(
          ApiError(500, "the model's output for input " + std::to_string(i) + " is not finite", {}, "internal_error"));
      return;
    }
    vectors_[i] = f.embedding;
    prompt_tokens_ += f.prompt_tokens;
    ++n_done_;
    if (n_done_ == vectors_.size()) {
      writer_->send(finish_(std::move(vectors_), prompt_tokens_));
      end_locked();
      return;
    }
    while (next_ < requests_.size() && running_ < slots_ && !ended_) submit_locked();
  }

  void fail_locked(const ApiError& e) {
    if (ended_) return;
    writer_->send(error_ ? error_(e) : core_.error_reply(e));
    end_locked();
  }

  // Cancels what still runs and gives the admission slots back, once.
  void end_locked() {
    if (ended_) return;
    ended_ = true;
    for (const RequestId id : ids_) {
      if (id >= 0) core_.backend().cancel(id);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    for (int32_t k = 0; k < slots_; ++k) core_.admission().release(seconds);
  }

  ServerCore& core_;
  std::vector<EngineRequest> requests_;  // each moved out when submitted
  const int32_t slots_;
  const std::string route_;
  const BatchFinish finish_;
  const BatchError error_;
  std::mutex mutex_;
  std::shared_ptr<ReplyWriter> writer_;
  std::vector<std::vector<float>> vectors_;  // [n_inputs][dims]
  std::vector<RequestId> ids_;               // [n_inputs] the engine's id while it runs, else -1
  size_t next_ = 0;                          // the next input to submit
  size_t n_done_ = 0;
  int32_t running_ = 0;
  int64_t prompt_tokens_ = 0;
  bool ended_ = false;
  const std::chrono::steady_clock::time_point start_;
};

}  // namespace

std::shared_ptr<AsyncReply> make_engine_batch_reply(ServerCore& core, std::vector<EngineRequest> requests,
                                                    int32_t slots, std::string route, BatchFinish finish,
                                                    BatchError error) {
  return std::make_shared<EngineBatchReply>(core, std::move(requests), slots, std::move(route), std::move(finish),
                                            std::move(error));
}

}  // namespace troupe::net
