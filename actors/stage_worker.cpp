// Stage worker: handshake, steps of the open session, forgetting ended
// requests, and the KV it holds for live ones.
#include "actors/stage_worker.hpp"

#include <caf/actor_system.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <random>
#include <unordered_map>
#include <unordered_set>

#include "actors/sampler_actor.hpp"
#include "actors/stage_step.hpp"
#include "core/error.hpp"
#include "model/device.hpp"
#include "model/model_identity.hpp"
#include "model/model_tokenizer.hpp"
#include "model/stage_plan.hpp"

namespace troupe {
namespace {

// What a step of an ended session gets (the head then treats the stage as lost).
constexpr const char* kNotOurSession = "step of a session this worker no longer serves (another head connected)";

struct WorkerParts {
  std::shared_ptr<const Tokenizer> tokenizer;  // the last stage's sampler needs it; null otherwise
  std::shared_ptr<Backend> backend;
  std::unique_ptr<ModelStage> stage;
  StageFacts facts;
  std::string secret;
  uint32_t wire_version = kStageWireVersion;
  std::function<void(const std::string&)> log;
};

class StageWorkerImpl : public stage_worker_actor::base {
 public:
  StageWorkerImpl(caf::actor_config& cfg, std::shared_ptr<WorkerParts> parts)
      : stage_worker_actor::base(cfg), parts_(std::move(parts)), pool_(TensorPool::create(8)) {}

  behavior_type make_behavior() override {
    set_down_handler([this](caf::down_msg& d) {
      if (d.source == head_) head_gone();
    });
    return {
        [this](StageHello& h) -> StageWelcome { return hello(h); },
        [this](RemoteStep& r) -> caf::typed_response_promise<StageOutput> { return on_step(r); },
        [this](ForgetRequests& f) {
          if (f.session != session_) return;
          for (const RequestId id : f.ids) live_.erase(id);
        },
        [this](StageScheduler& s) {
          if (s.session == session_) scheduler_ = std::move(s.scheduler);
        },
        [this](stats_atom) -> WorkerStats {
          std::unordered_set<int32_t> blocks;
          for (const auto& [id, table] : live_) blocks.insert(table.begin(), table.end());
          return {.session = session_,
                  .steps = steps_,
                  .live_sequences = static_cast<int32_t>(live_.size()),
                  .kv_blocks_in_use = static_cast<int64_t>(blocks.size()),
                  .kv_blocks_total = parts_->facts.kv_blocks};
        },
    };
  }

 private:
  void on_exit() override {
    if (sampler_) send_exit(sampler_, caf::exit_reason::user_shutdown);
    sampler_ = nullptr;
    scheduler_ = nullptr;
  }

  void log(const std::string& line) const {
    if (parts_->log) parts_->log(line);
  }

  StageWelcome hello(const StageHello& h) {
    const std::string verdict = check_hello(h.wire_version, h.json, parts_->facts, parts_->secret, parts_->wire_version);
    if (!verdict.empty()) {
      log("refused a head: " + verdict);
      return {.wire_version = parts_->wire_version, .accepted = false, .json = refusal_json(verdict)};
    }
    // A new head (or the same one reconnecting) starts afresh: whatever the
    // old session held is forgotten, and its late steps are refused.
    end_session();
    session_ = next_session();  // the new session's first step names its head
    // A last stage samples here, with a sampler of this session's own.
    if (parts_->tokenizer) sampler_ = spawn_sampler(system(), parts_->tokenizer);
    log("session " + std::to_string(session_) + " opened");
    return {.wire_version = parts_->wire_version,
            .accepted = true,
            .session = session_,
            .json = facts_json(parts_->facts),
            .sampler = caf::actor_cast<caf::actor>(sampler_)};
  }

  // The actor that sends this session's steps (the head's remote stage; the
  // handshake comes from a helper that does not outlive it). When it goes
  // away, so does everything it would have forgotten: a head that stops, or
  // loses its connection, with requests still live (or their ForgetRequests
  // still on the way) would otherwise leave them here until the next head.
  void watch_head() {
    const caf::strong_actor_ptr& sender = current_sender();
    if (!sender || sender->address() == head_) return;
    if (head_) demonitor(head_);
    head_ = sender->address();
    monitor(sender);
  }

  void head_gone() {
    log("session " + std::to_string(session_) + " closed: its head went away with " + std::to_string(live_.size()) +
        " requests live");
    end_session();
    session_ = 0;
  }

  // Forgets what the session held: its requests, head, scheduler, sampler.
  void end_session() {
    live_.clear();
    scheduler_ = nullptr;
    if (head_) demonitor(head_);
    head_ = nullptr;
    if (sampler_) send_exit(sampler_, caf::exit_reason::user_shutdown);
    sampler_ = nullptr;
  }

  uint64_t next_session() {
    uint64_t s = 0;
    while (s == 0 || s == session_) s = rng_();
    return s;
  }

  // The head is watched before the promise takes the message's sender.
  caf::typed_response_promise<StageOutput> on_step(RemoteStep& r) {
    const bool ours = session_ != 0 && r.session == session_;
    if (ours) watch_head();
    auto rp = make_response_promise<StageOutput>();
    StageOutput out = step(r, ours);
    if (!out.error.empty() || !sampler_ || !scheduler_) {
      rp.deliver(std::move(out));
    } else {
      sample_then_answer(r, std::move(out), rp);
    }
    return rp;
  }

  StageOutput step(RemoteStep& r, bool ours) {
    StageOutput out{.step = r.batch.step, .engine = r.batch.engine};
    if (!ours) {
      out.code = Errc::unavailable;
      out.error = kNotOurSession;
      return out;
    }
    const int64_t t0 = steady_now_ns();
    try {
      out.out = run_stage_step(*parts_->stage, *pool_, r.batch, seqs_);
    } catch (const Error& e) {
      out.code = e.code();
      out.error = e.what();
      return out;
    } catch (const std::exception& e) {
      out.code = Errc::internal;
      out.error = e.what();
      return out;
    }
    out.compute_ns = steady_now_ns() - t0;
    ++steps_;
    for (StageSeq& s : r.batch.seqs) live_[s.id] = std::move(s.block_table);
    return out;
  }

  // The logits go to this process's sampler; its tokens go to the head's
  // scheduler before the step's answer does. Both leave from this actor,
  // in that order, over the one connection to the head: the head sees the
  // answer only after the tokens, so a worker that stops in between is
  // caught by the step's deadline instead of leaving the scheduler waiting
  // for tokens with nothing in flight.
  void sample_then_answer(const RemoteStep& r, StageOutput out, caf::typed_response_promise<StageOutput> rp) {
    StepLogits logits = step_logits(r.batch, std::move(out.out), r.batch.compute_ns + out.compute_ns);
    out.sampled = true;
    request(sampler_, caf::infinite, std::move(logits))
        .then(
            [this, rp, out](SampledStep& sampled) mutable {
              if (scheduler_) send(caf::actor_cast<scheduler_actor>(scheduler_), std::move(sampled));
              rp.deliver(std::move(out));
            },
            [this, rp, out, session = r.session](caf::error& e) mutable {
              out.sampled = false;
              if (session != session_) {  // the sampler went with its session: another head took over
                out.code = Errc::unavailable;
                out.error = kNotOurSession;
              } else {
                out.code = Errc::internal;
                out.error = "sampler: " + caf::to_string(e);
              }
              rp.deliver(std::move(out));
            });
  }

  std::shared_ptr<WorkerParts> parts_;
  std::shared_ptr<TensorPool> pool_;
  std::vector<BatchSeq> seqs_;
  uint64_t session_ = 0;
  uint64_t steps_ = 0;
  std::unordered_map<RequestId, std::vector<int32_t>> live_;  // request -> its latest block table
  sampler_actor sampler_;  // this session's (a last stage), else null
  caf::actor scheduler_;   // the head's, for the sampler's replies
  caf::actor_addr head_;   // the sender of this session's steps, monitored
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace

stage_worker_actor spawn_stage_worker(caf::actor_system& system, const StageWorkerOptions& o, StageFacts* facts) {
  if (!o.model) throw Error(Errc::invalid_argument, "stage worker: no model");
  const Model& model = *o.model;
  const int64_t n_layer = model.config().n_layer;
  const int64_t last = o.last_layer < 0 ? n_layer : o.last_layer;
  if (o.first_layer < 0 || o.first_layer >= last || last > n_layer) {
    throw Error(Errc::invalid_argument, "--layers " + std::to_string(o.first_layer) + ":" + std::to_string(last) +
                                            " is not a non-empty range inside the model's " +
                                            std::to_string(n_layer) + " layers");
  }
  const StageOptions limits{.first_layer = o.first_layer,
                            .last_layer = last,
                            .max_tokens = o.max_tokens,
                            .max_seqs = o.max_seqs,
                            .n_kv_blocks = o.kv_blocks,
                            .kv_block_size = o.kv_block_size,
                            .kv_type = o.kv_type,
                            .n_state_slots = o.state_slots > 0 ? o.state_slots : 2 * o.max_seqs,
                            .embedding_output = o.embedding};
  const Device device = parse_device(o.device);
  const StageFootprint fp = ModelStage::footprint(model, limits, device.is_cuda());
  auto parts = std::make_shared<WorkerParts>();
  parts->backend = open_backend(device, o.threads,
                                {.weight_bytes = fp.weight_bytes, .kv_bytes = fp.kv_bytes, .arena_bytes = fp.arena_bytes});
  parts->stage = std::make_unique<ModelStage>(o.model, *parts->backend, limits);
  parts->facts = {.model_id = model_identity(model),
                  .model_name = model_display_name(model),
                  .first_layer = o.first_layer,
                  .last_layer = last,
                  .kv_blocks = o.kv_blocks,
                  .kv_block_size = o.kv_block_size,
                  .kv_dtype = kv_type_name(o.kv_type),
                  .max_tokens = o.max_tokens,
                  .max_seqs = o.max_seqs,
                  .state_slots = parts->stage->state_slots(),
                  .embedding_output = o.embedding && last == n_layer,
                  .device = device.str()};
  if (last == n_layer) parts->tokenizer = load_model_tokenizer(model);
  parts->secret = o.secret;
  parts->wire_version = o.wire_version;
  parts->log = o.log;
  if (facts != nullptr) *facts = parts->facts;
  return system.spawn<StageWorkerImpl, caf::detached>(std::move(parts));
}

}  // namespace troupe
