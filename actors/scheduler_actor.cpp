// Scheduler actor: turns arrivals, step outcomes, cancellations and wake-ups
// into EngineSet calls, and the resulting plans into StageBatch messages.
// Every request that ends here gets exactly one RequestDone to the
// detokenizer, after the SampledStep that carried its last token.
#include "actors/scheduler_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <deque>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "actors/actor_meter.hpp"
#include "actors/engine_set.hpp"
#include "actors/prompt_images.hpp"
#include "actors/scheduler_policy_step.hpp"
#include "model/sampler.hpp"

namespace troupe {
namespace {

class SchedulerImpl : public scheduler_actor::base {
 public:
  SchedulerImpl(caf::actor_config& cfg, const SchedulerActorOptions& options, executor_actor first_stage,
                sampler_actor sampler, detokenizer_actor detokenizer)
      : scheduler_actor::base(cfg),
        engines_(options.scheduler, options.kv, options.n_engines),
        monitor_(options.monitor),
        forward_ended_(options.forward_ended),
        spec_proposer_(options.scheduler.spec_max_draft <= 0 ? ""
                       : options.scheduler.spec_proposer ? options.scheduler.spec_proposer->name()
                                                         : "ngram"),
        step_times_(options.anomaly),
        first_stage_(std::move(first_stage)),
        sampler_(std::move(sampler)),
        detokenizer_(std::move(detokenizer)) {}

  behavior_type make_behavior() override {
    return {
        [this](TokenRequest& r) { on_request(r); },
        [this](SampledStep& s) { on_sampled(s); },
        [this](StepFailed& f) {
          const StepPlan* plan = f.engine >= 0 ? engines_.in_flight(f.engine) : nullptr;
          if (plan != nullptr && plan->step == f.step) fail_step(f.engine, f.code, f.message);
          if (f.stage_lost) lose_kv(f.code, f.message);
          dispatch();
        },
        [this](cancel_atom, RequestId id) {
          if (live_.count(id) == 0) {
            // Ended already (cancel is idempotent), or still at the front
            // door (the tokenizer actor): remembered, so that it ends as
            // soon as it arrives.
            remember_cancel(id);
            return;
          }
          engines_.cancel(id);
          ++n_cancelled_;
          end(id, EndReason::cancelled, Errc::cancelled, req_name(id) + " cancelled");
          dispatch();
        },
        [this](stop_atom, RequestId id) {
          // The detokenizer has sent the final event already; only free.
          const auto it = live_.find(id);
          if (it == live_.end()) return;
          engines_.cancel(id);
          if (it->second.opened) send(sampler_, SeqClose{.id = id});
          if (it->second.opened && forward_ended_) ended_.push_back(id);
          live_.erase(it);
          ++n_finished_;
          dispatch();
        },
        [this](wake_atom) {
          wake_pending_ = false;
          dispatch();
        },
        // The remote last stage's worker samples; after a reconnect it has a
        // new sampler. Every request it knew has ended with the lost stage.
        [this](caf::connect_atom, caf::actor sampler) { sampler_ = caf::actor_cast<sampler_actor>(std::move(sampler)); },
        [this](stats_atom) -> PipelineStats { return stats(); },
        [this](kv_atom) -> KvSnapshot { return snapshot(); },
        [this](shutdown_atom) -> caf::ok_atom {
          stopping_ = true;
          std::vector<RequestId> ids;
          for (const auto& [id, l] : live_) ids.push_back(id);
          for (const RequestId id : ids) {
            engines_.cancel(id);
            ++n_cancelled_;
            end(id, EndReason::cancelled, Errc::cancelled, req_name(id) + ": the pipeline shut down");
          }
          return caf::ok_atom::value;
        },
    };
  }

  void on_exit() override {
    // The executors hold this actor's handle too: drop ours so that no
    // reference cycle outlives the actor system.
    first_stage_ = nullptr;
    sampler_ = nullptr;
    detokenizer_ = nullptr;
  }

 private:
  struct Live {
    GenerateParams params;
    int64_t submit_ns = 0;
    bool opened = false;  // the sampler and detokenizer know it (first scheduled)
    // A prompt with images: its token ids (the engines hold it keyed by the
    // images, prompt_images.hpp) and the images' features.
    std::vector<int32_t> prompt;
    std::vector<PromptImage> images;
  };

  void on_request(TokenRequest& r) {
    // Every rule on the request was checked at the front door (the tokenizer
    // actor, actors/request_rules.hpp).
    if (cancelled_early_.erase(r.id) != 0) {
      ++n_cancelled_;
      send(detokenizer_, RequestDone{.id = r.id,
                                     .reason = EndReason::cancelled,
                                     .code = Errc::cancelled,
                                     .message = req_name(r.id) + " cancelled"});
      return;
    }
    std::string why = stopping_ ? "the pipeline shut down" : std::string();
    if (why.empty() && live_.count(r.id) != 0) why = "duplicate request id";
    if (why.empty()) why = check_prompt_images(r.images, r.prompt.size());
    if (why.empty()) {
      const bool images = !r.images.empty();
      // Proposals read the token history, where an image is only keys.
      const AddStatus status =
          engines_.add({.id = r.id,
                        .prompt = images ? image_keyed_prompt(r.prompt, r.images) : std::move(r.prompt),
                        .max_new_tokens = r.params.max_new_tokens,
                        .priority = r.params.priority,
                        .arrival = Clock::now(),
                        .speculative = r.params.speculative && !images,
                        // Mean and CLS pooling read every prompt row, as prompt
                        // scoring does (CLS keeps the first).
                        .score_prompt = r.params.prompt_logprobs || r.params.embed.pooling == Pooling::mean ||
                                        r.params.embed.pooling == Pooling::cls,
                        .embed = r.params.embed.on,
                        .whole_spans = open_image_spans(r.images)});
      if (status == AddStatus::queue_full) {
        ++n_errors_;
        send(detokenizer_, RequestDone{.id = r.id,
                                       .reason = EndReason::error,
                                       .code = Errc::overloaded,
                                       .message = req_name(r.id) + ": the waiting queue is full"});
        return;
      }
      live_[r.id] = Live{.params = std::move(r.params),
                         .submit_ns = r.submit_ns,
                         .prompt = images ? std::move(r.prompt) : std::vector<int32_t>{},
                         .images = std::move(r.images)};
      dispatch();
      return;
    }
    const bool cancelled = stopping_;
    ++(cancelled ? n_cancelled_ : n_errors_);
    send(detokenizer_, RequestDone{.id = r.id,
                                   .reason = cancelled ? EndReason::cancelled : EndReason::error,
                                   .code = cancelled ? Errc::cancelled : Errc::invalid_argument,
                                   .message = req_name(r.id) + ": " + why});
  }

  // Cancels of ids not (yet) here, the oldest forgotten first: a request
  // cancelled while it is tokenized arrives later, an ended or unknown id
  // never does.
  void remember_cancel(RequestId id) {
    constexpr size_t kRemembered = 4096;
    if (!cancelled_early_.insert(id).second) return;
    cancel_order_.push_back(id);
    if (cancel_order_.size() > kRemembered) {
      cancelled_early_.erase(cancel_order_.front());
      cancel_order_.pop_front();
    }
  }

  void on_sampled(SampledStep& s) {
    const StepPlan* plan = engines_.in_flight(s.engine);
    if (plan == nullptr || plan->step != s.step) return;  // its engine failed meanwhile
    StepResult result;
    std::unordered_map<RequestId, const SampledToken*> errors;
    size_t row = 0;
    bool rows_match = true;
    for (const ScheduledSeq& e : plan->seqs) {
      SeqOutput out{.request_id = e.request_id};
      // The entry's rows: prompt scores and unused rows carry no token; the
      // tokens are the accepted proposals, then the sampled one (the last).
      std::optional<int32_t> last;
      bool ended = false;
      for (int32_t j = 0; j < e.n_logits(); ++j) {
        if (row >= s.tokens.size() || s.tokens[row].id != e.request_id) {
          rows_match = false;
          break;
        }
        const SampledToken& t = s.tokens[row++];
        if (t.status == SampleStatus::token) {
          if (last) out.accepted.push_back(*last);
          last = t.token;
        }
        ended |= t.finished || t.status == SampleStatus::failed || t.status == SampleStatus::skipped;
        if (t.status == SampleStatus::failed) errors[e.request_id] = &t;
      }
      if (e.need_logits) {
        out.token = last;
        // No token (skipped, failed) ends the sequence: nothing can follow.
        out.finished = ended || !out.token;
      }
      result.outputs.push_back(std::move(out));
    }
    if (!rows_match || result.outputs.size() != plan->seqs.size() || row != s.tokens.size()) {
      fail_step(s.engine, Errc::internal,
                "the sampler answered step " + std::to_string(s.step) + " with rows that do not match its logits");
      dispatch();
      return;
    }
    watch_step_time(*plan, s.engine, s.compute_ns);
    const std::vector<FinishedSeq> finished = engines_.complete(s.engine, result);
    send(detokenizer_, std::move(s));
    for (const FinishedSeq& f : finished) {
      const auto err = errors.find(f.request_id);
      if (err != errors.end()) {
        ++n_errors_;
        end(f.request_id, EndReason::error, err->second->error_code, req_name(f.request_id) + ": " + err->second->error);
      } else {
        ++n_finished_;
        end(f.request_id, f.reason == FinishReason::length ? EndReason::length : EndReason::stop,
            Errc::internal, {});
      }
    }
    dispatch();
  }

  // A step that cannot complete fails every request in it; the engine is
  // then free again.
  void fail_step(int32_t engine, Errc code, const std::string& message) {
    const StepPlan& plan = *engines_.in_flight(engine);
    StepResult result;
    std::vector<RequestId> ids;
    for (const ScheduledSeq& e : plan.seqs) {
      result.outputs.push_back({.request_id = e.request_id, .finished = true});
      ids.push_back(e.request_id);
    }
    for (const RequestId id : ids) {
      if (live_.count(id) == 0) continue;
      engines_.cancel(id);
      ++n_errors_;
      end(id, EndReason::error, code, req_name(id) + ": " + message);
    }
    engines_.complete(engine, result);  // everyone in it is gone: only frees the engine
  }

  // A stage lost its KV pages (a remote worker died or hung): every request
  // holding KV fails with the reason, and no cached prefix is reused. The
  // requests still waiting are untouched; they run once the stage is back
  // (until then their steps fail fast with the stage's error).
  void lose_kv(Errc code, const std::string& message) {
    // Steps still in flight anywhere are abandoned: one whose logits went to
    // the lost worker's sampler would never be answered. Late answers of
    // abandoned steps find another step id and are dropped.
    for (int32_t engine = 0; engine < engines_.n_engines(); ++engine) {
      if (engines_.in_flight(engine) != nullptr) fail_step(engine, code, message);
    }
    std::vector<RequestId> ids;
    for (const auto& [id, l] : live_) {
      if (engines_.kv().contains(id)) ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    for (const RequestId id : ids) {
      engines_.cancel(id);
      ++n_errors_;
      end(id, EndReason::error, code, req_name(id) + ": " + message);
    }
    engines_.drop_prefix_cache();
  }

  // Ends a live request: one RequestDone to the detokenizer, and the sampler
  // forgets it.
  void end(RequestId id, EndReason reason, Errc code, std::string message) {
    const auto it = live_.find(id);
    if (it == live_.end()) return;
    if (it->second.opened) send(sampler_, SeqClose{.id = id});
    if (it->second.opened && forward_ended_) ended_.push_back(id);
    send(detokenizer_, RequestDone{.id = id, .reason = reason, .code = code, .message = std::move(message)});
    live_.erase(it);
  }

  void dispatch() {
    SchedulingRound round = engines_.schedule(Clock::now());
    for (RejectedRequest& r : round.rejected) {
      ++n_errors_;
      end(r.request_id, EndReason::error, r.code, std::move(r.reason));
    }
    // Ended requests first: a step planned now may reuse their KV pages.
    if (!ended_.empty()) {
      send(first_stage_, ForgetRequests{.ids = std::move(ended_)});
      ended_.clear();
    }
    for (const int32_t engine : round.started) send_step(*engines_.in_flight(engine), engine);
    if (round.wake_at) wake_at(*round.wake_at);
    kv_peak_ = std::max(kv_peak_, engines_.kv().pool().n_used());
  }

  // Step time against its size class's baseline: prefill-carrying steps and
  // pure decode steps, bucketed by tokens in the step. The time is the
  // stages' forward time, not dispatch-to-sampled: with several micro-batches
  // in flight a step also waits behind the others at each stage, which
  // depends on what they carry, and would make every long prefill an
  // excursion of its neighbours. Queueing shows in TTFT instead.
  void watch_step_time(const StepPlan& plan, int32_t engine, int64_t compute_ns) {
    if (!monitor_ || compute_ns <= 0) return;
    const double seconds = static_cast<double>(compute_ns) * 1e-9;
    bool prefill = false;
    for (const ScheduledSeq& e : plan.seqs) prefill |= e.tokens.size() > 1;
    const int64_t n_tokens = plan.n_tokens();
    const EwmaDetector::Verdict v = step_times_.observe(prefill ? 1 : 0, n_tokens, seconds);
    if (!v.anomaly) return;
    AnomalyEvent e{.metric = "step_time",
                   .value_s = seconds,
                   .baseline_s = v.baseline,
                   .deviation_s = v.deviation,
                   .step = plan.step,
                   .engine = engine,
                   .detail = BucketedDetector::bucket_name(prefill ? "prefill" : "decode", n_tokens)};
    for (const ScheduledSeq& q : plan.seqs) e.requests.push_back(q.request_id);
    monitor_->report(std::move(e));
  }

  void send_step(const StepPlan& plan, int32_t engine) {
    StageBatch batch{.step = plan.step, .engine = engine};
    batch.seqs.reserve(plan.seqs.size());
    batch.tokens.reserve(static_cast<size_t>(plan.n_tokens()));
    for (const ScheduledSeq& e : plan.seqs) {
      Live& l = live_.at(e.request_id);
      if (!l.opened) open(e.request_id, l);
      batch.seqs.push_back({.id = e.request_id,
                            .n_tokens = static_cast<int32_t>(e.tokens.size()),
                            .n_past = e.n_past,
                            .block_table = e.block_table,
                            .n_logits = e.n_logits(),
                            .state_slot = e.state_slot,
                            .type1_from = l.params.embed.type1_from,
                            .embeds = step_embeds(l.images, e.n_past, static_cast<int32_t>(e.tokens.size())),
                            .open_spans = step_open_spans(l.images, e.n_past, static_cast<int32_t>(e.tokens.size()))});
      if (l.images.empty()) {
        batch.tokens.insert(batch.tokens.end(), e.tokens.begin(), e.tokens.end());
        continue;
      }
      // The prompt's own ids where the engines hold an image's keys.
      for (size_t i = 0; i < e.tokens.size(); ++i) {
        const size_t pos = static_cast<size_t>(e.n_past) + i;
        batch.tokens.push_back(pos < l.prompt.size() ? l.prompt[pos] : e.tokens[i]);
      }
    }
    send(first_stage_, std::move(batch));
  }

  // First time scheduled: the sampler and detokenizer learn the request
  // before any of its logits or tokens can reach them.
  void open(RequestId id, Live& l) {
    const std::vector<int32_t>* tokens = l.images.empty() ? engines_.tokens(id) : &l.prompt;
    SeqOpen msg{.id = id, .params = l.params, .prompt = *tokens, .admit_ns = steady_now_ns()};
    send(detokenizer_, msg);
    send(sampler_, std::move(msg));
    l.opened = true;
  }

  void wake_at(Clock::time_point t) {
    if (wake_pending_ && wake_time_ <= t) return;
    wake_pending_ = true;
    wake_time_ = t;
    const auto delay = std::max(Clock::duration::zero(), t - Clock::now());
    delayed_send(scheduler_actor{this}, delay, wake_atom_v);
  }

  PipelineStats stats() const {
    const SchedulerStats s = engines_.stats();
    const KvBlockPool& pool = engines_.kv().pool();
    return {.kv_blocks_total = pool.n_blocks(),
            .kv_blocks_used = pool.n_used(),
            .kv_blocks_cached = pool.n_cached(),
            .kv_blocks_free = pool.n_free(),
            .kv_blocks_peak = kv_peak_,
            .running = engines_.n_running(),
            .waiting = engines_.n_waiting(),
            .steps_in_flight = engines_.n_in_flight(),
            .steps = s.steps,
            .admitted = s.admitted,
            .preemptions = s.preemptions,
            .finished = n_finished_,
            .cancelled = n_cancelled_,
            .rejected = n_errors_,
            .prompt_tokens = s.prompt_tokens,
            .prefix_hit_tokens = s.prefix_hit_tokens,
            .prefix_hit_rate = s.prefix_hit_rate(),
            .spec_proposer = spec_proposer_,
            .spec_proposed = s.spec_proposed,
            .spec_accepted = s.spec_accepted};
  }

  KvSnapshot snapshot() const {
    const KvCacheManager& kv = engines_.kv();
    KvSnapshot snap{.n_blocks = kv.pool().n_blocks(),
                    .n_used = kv.pool().n_used(),
                    .n_cached = kv.pool().n_cached(),
                    .n_free = kv.pool().n_free()};
    for (const auto& [id, l] : live_) {
      if (!kv.contains(id)) continue;
      const std::span<const int32_t> t = kv.block_table(id);
      snap.sequences.push_back({.id = id, .blocks = {t.begin(), t.end()}});
    }
    std::sort(snap.sequences.begin(), snap.sequences.end(),
              [](const KvSequenceBlocks& a, const KvSequenceBlocks& b) { return a.id < b.id; });
    try {
      engines_.check_invariants();
    } catch (const std::exception& e) {
      snap.invariant_error = e.what();
    }
    return snap;
  }

  EngineSet engines_;
  std::shared_ptr<AnomalyMonitor> monitor_;
  bool forward_ended_ = false;
  std::string spec_proposer_;
  std::vector<RequestId> ended_;  // ended since the last dispatch (forward_ended_)
  BucketedDetector step_times_;
  int32_t kv_peak_ = 0;
  std::unordered_map<RequestId, Live> live_;
  std::unordered_set<RequestId> cancelled_early_;  // see remember_cancel
  std::deque<RequestId> cancel_order_;
  executor_actor first_stage_;
  sampler_actor sampler_;
  detokenizer_actor detokenizer_;
  bool stopping_ = false;
  bool wake_pending_ = false;
  Clock::time_point wake_time_{};
  uint64_t n_finished_ = 0;
  uint64_t n_cancelled_ = 0;
  uint64_t n_errors_ = 0;
};

}  // namespace

scheduler_actor spawn_scheduler(caf::actor_system& system, SchedulerActorOptions options,
                                executor_actor first_stage, sampler_actor sampler,
                                detokenizer_actor detokenizer, std::shared_ptr<ActorMeter> meter) {
  if (meter) {
    return system.spawn<Metered<SchedulerImpl>>(std::move(meter), options, std::move(first_stage),
                                                std::move(sampler), std::move(detokenizer));
  }
  return system.spawn<SchedulerImpl>(options, std::move(first_stage), std::move(sampler),
                                     std::move(detokenizer));
}

}  // namespace troupe
