// Executor actor: StageBatch in, ModelStage::forward, hidden states to the
// next stage or logits to the sampler; its input buffer goes back to the
// previous stage's pool as soon as the forward pass is done.
#include "actors/executor_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/actor_meter.hpp"
#include "core/error.hpp"

namespace troupe {
namespace {

class ExecutorImpl : public executor_actor::base {
 public:
  ExecutorImpl(caf::actor_config& cfg, ExecutorParts& parts, executor_actor next, sampler_actor sampler)
      : executor_actor::base(cfg),
        backend_(std::move(parts.backend)),
        stage_(std::move(parts.stage)),
        pool_(TensorPool::create(parts.max_free_buffers)),
        before_step_(std::move(parts.before_step)),
        next_(std::move(next)),
        sampler_(std::move(sampler)) {}

  behavior_type make_behavior() override {
    return {
        [this](StageBatch& batch) { run(batch); },
        [this](caf::connect_atom, scheduler_actor scheduler) { scheduler_ = std::move(scheduler); },
    };
  }

  void on_exit() override {
    next_ = nullptr;
    sampler_ = nullptr;
    scheduler_ = nullptr;
  }

 private:
  std::string stage_name() const {
    return "stage [" + std::to_string(stage_->first_layer()) + ", " + std::to_string(stage_->last_layer()) +
           ")";
  }

  void run(StageBatch& batch) {
    seqs_.clear();
    for (const StageSeq& s : batch.seqs) {
      seqs_.push_back({.n_tokens = s.n_tokens,
                       .n_past = s.n_past,
                       .block_table = s.block_table,
                       .want_logits = s.want_logits});
    }
    const BatchView view{.tokens = batch.tokens, .seqs = seqs_};
    const int64_t n_rows = stage_->is_last() ? view.n_logit_rows() : view.n_tokens();
    TensorHandle out;
    const int64_t t0 = steady_now_ns();
    try {
      if (before_step_) before_step_(batch.step);
      const float* hidden_in = nullptr;
      if (!stage_->is_first()) {
        const int64_t n_embd = stage_->model().config().n_embd;
        if (!batch.hidden || batch.hidden->rows != view.n_tokens() || batch.hidden->cols != n_embd) {
          throw Error(Errc::internal, "hidden state of step " + std::to_string(batch.step) +
                                          " does not have shape [n_tokens, n_embd]");
        }
        hidden_in = batch.hidden->data.data();
      }
      out = pool_->acquire(n_rows, stage_->output_width());
      stage_->forward(view, hidden_in, out->data.data());
    } catch (const Error& e) {
      fail(batch, e.code(), e.what());
      return;
    } catch (const std::exception& e) {
      fail(batch, Errc::internal, e.what());
      return;
    }
    batch.hidden = nullptr;  // back to the previous stage's pool
    batch.compute_ns += steady_now_ns() - t0;
    if (next_) {
      batch.hidden = std::move(out);
      send(next_, std::move(batch));
      return;
    }
    StepLogits logits{
        .step = batch.step, .engine = batch.engine, .logits = std::move(out), .compute_ns = batch.compute_ns};
    for (const StageSeq& s : batch.seqs) {
      if (s.want_logits) logits.rows.push_back(s.id);
    }
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
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ModelStage> stage_;
  std::shared_ptr<TensorPool> pool_;
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
