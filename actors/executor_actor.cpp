// Executor actor: StageBatch in, ModelStage::forward, hidden states to the
// next stage or logits to the sampler; its input buffer goes back to the
// previous stage's pool as soon as the forward pass is done.
#include "actors/executor_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/actor_meter.hpp"
#include "actors/stage_status.hpp"
#include "actors/stage_step.hpp"
#include "core/error.hpp"

namespace troupe {
namespace {

class ExecutorImpl : public executor_actor::base {
 public:
  ExecutorImpl(caf::actor_config& cfg, ExecutorParts& parts, executor_actor next, sampler_actor sampler)
      : executor_actor::base(cfg),
        backend_(std::move(parts.backend)),
        stage_(std::move(parts.stage)),
        pool_(TensorPool::create(parts.max_free_buffers, std::move(parts.output_memory))),
        status_(std::move(parts.status)),
        before_step_(std::move(parts.before_step)),
        next_(std::move(next)),
        sampler_(std::move(sampler)) {}

  behavior_type make_behavior() override {
    return {
        [this](StageBatch& batch) { run(batch); },
        [this](caf::connect_atom, scheduler_actor scheduler) { scheduler_ = std::move(scheduler); },
        // Nothing to forget in-process (KV pages are the scheduler's); a
        // remote stage further down the chain needs it.
        [this](ForgetRequests& f) {
          if (next_) send(next_, std::move(f));
        },
    };
  }

  void on_exit() override {
    next_ = nullptr;
    sampler_ = nullptr;
    scheduler_ = nullptr;
  }

 private:
  std::string stage_name() const {
    return "stage [" + std::to_string(stage_->first_layer()) + ", " + std::to_string(stage_->last_layer()) + ") on " +
           std::string(backend_->name());
  }

  void run(StageBatch& batch) {
    TensorHandle out;
    const int64_t t0 = steady_now_ns();
    try {
      if (status_ && !status_->up()) {
        throw Error(Errc::unavailable, "failed earlier: " + status_->snapshot().error);
      }
      if (before_step_) before_step_(batch.step);
      out = run_stage_step(*stage_, *pool_, batch, seqs_);
    } catch (const Error& e) {
      if (e.code() == Errc::unavailable && status_ && status_->up()) status_->set_down(e.what());
      fail(batch, e.code(), e.what());
      return;
    } catch (const std::exception& e) {
      fail(batch, Errc::internal, e.what());
      return;
    }
    batch.hidden = nullptr;  // back to the previous stage's pool
    batch.compute_ns += steady_now_ns() - t0;
    if (next_) {
      // The images are in the hidden states now: later stages (and the
      // wire to a remote one) need not carry them.
      for (StageSeq& s : batch.seqs) s.embeds.clear();
      batch.hidden = std::move(out);
      send(next_, std::move(batch));
      return;
    }
    StepLogits logits = step_logits(batch, std::move(out), batch.compute_ns);
    // As the scheduler, so the sampler's SampledStep reply goes to it.
    caf::send_as(scheduler_, sampler_, std::move(logits));
  }

  void fail(const StageBatch& batch, Errc code, const std::string& what) {
    send(scheduler_, StepFailed{.step = batch.step,
                                .engine = batch.engine,
                                .code = code,
                                .message = stage_name() + ": " + what});
  }

  // Declared before the stage: the stage's destructor returns its memory to
  // the backend.
  std::shared_ptr<Backend> backend_;
  std::unique_ptr<ModelStage> stage_;
  std::shared_ptr<TensorPool> pool_;
  std::shared_ptr<StageStatus> status_;
  std::function<void(uint64_t)> before_step_;
  executor_actor next_;
  sampler_actor sampler_;
  scheduler_actor scheduler_;
  std::vector<BatchSeq> seqs_;
};

}  // namespace

executor_actor spawn_executor(caf::actor_system& system, ExecutorParts parts, executor_actor next,
                              sampler_actor sampler, std::shared_ptr<ActorMeter> meter) {
  if (meter) {
    return system.spawn<Metered<ExecutorImpl>, caf::detached>(std::move(meter), parts, std::move(next),
                                                             std::move(sampler));
  }
  return system.spawn<ExecutorImpl, caf::detached>(parts, std::move(next), std::move(sampler));
}

}  // namespace troupe
