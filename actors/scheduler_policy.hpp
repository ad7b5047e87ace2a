// The continuous-batching policy: which sequences run in the next step, how
// many tokens each feeds, who is admitted, preempted or rejected. Plain C++
// over a KvCacheManager; the scheduler actor is a thin shell around it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "memory/kv_cache_manager.hpp"
#include "model/ngram_proposer.hpp"

namespace troupe {

using Clock = std::chrono::steady_clock;

enum class Priority : uint8_t { interactive = 0, batch = 1 };

struct Request {
  int64_t id = 0;
  std::vector<int32_t> prompt;  // [n_tokens]
  int32_t max_new_tokens = 256;
  Priority priority = Priority::interactive;
  Clock::time_point arrival{};
  bool speculative = true;    // may feed proposed tokens (when the config has speculation on)
  bool score_prompt = false;  // logits for every prompt token (prompt logprobs); no prefix reuse
  bool embed = false;         // an embedding request: its prompt may fill the context, nothing follows it
  // [2k] (begin, end) prompt spans no prefill chunk ends inside: blocks whose
  // tokens see the whole block (Gemma 3's images), whose keys must all be
  // written in the step that computes any of them.
  std::vector<int32_t> whole_spans;
};

struct SchedulerConfig {
  int32_t max_batch_size = 64;         // sequences per step (and running at once)
  int32_t max_tokens_per_step = 2048;  // token budget of one forward pass
  bool chunked_prefill = true;
  int32_t prefill_chunk = 512;  // prompt tokens per sequence per step
  // An encoder's prompts (ModelConfig::causal false): each is computed in one
  // step, never in chunks nor from a cached prefix, since every token's keys
  // depend on the tokens after it. max_tokens_per_step must hold the context.
  bool whole_prompts = false;
  // Batching delay: an idle engine with fewer than min_batch_size waiting
  // requests waits until the oldest has waited max_wait. 0 never waits.
  int32_t min_batch_size = 1;
  std::chrono::microseconds max_wait{0};
  int32_t max_waiting = 1024;     // add() refuses beyond this (HTTP 429)
  int32_t context_length = 4096;  // prompt + generated tokens, at most
  // Fraction of KV blocks an admission must leave free while others run, so
  // running decodes can grow without preempting.
  double kv_watermark = 0.01;
  // Length levels of the waiting queue: level i holds prompts of at most
  // level_bounds[i] tokens, the last level the rest.
  std::vector<int32_t> level_bounds = {256, 2048};
  // Every level_aging waited lifts a request one level (0: no aging), so long
  // prompts are not starved by a stream of short ones.
  std::chrono::microseconds level_aging = std::chrono::seconds(2);

  // KV demand (against starvation when the pool runs out). A request is
  // admitted only when the blocks it may still need, its prompt plus
  // kv_demand_fraction of its expected output, fit beside what the running
  // ones may still need. The expected output is max_new_tokens times the
  // share of max_new_tokens that finished requests used (an upper envelope:
  // at once up to a larger share, slowly down; 1 until one finished), so a
  // server whose requests end at EOS long before max_tokens runs many at
  // once, while one fed generations that run to max_tokens admits as if
  // each took all of it. 0: only the first chunk is checked, as vLLM does
  // (more run at once, but a full pool preempts).
  double kv_demand_fraction = 1.0;
  // A request whose prompt + max_new_tokens is at most this is short. The
  // last short_kv_share of the KV blocks and short_batch_share of the batch
  // slots are kept for short requests, and a long request that cannot be
  // admitted does not hold short ones back: a short request keeps a share of
  // every step however many long ones wait.
  int32_t short_request_tokens = 256;
  double short_kv_share = 0.01;
  double short_batch_share = 0.125;
  // A sequence preempted this many times is not chosen as a victim again
  // while another one can be, which bounds its recompute to this many times
  // its length (see the preemption rule below).
  int32_t max_preemptions = 2;

  // Speculative decoding by prompt lookup (model/ngram_proposer.hpp): a
  // decode feeds its last token plus up to spec_max_draft proposed ones,
  // and the sampler verifies them in the same step. 0: off. How many a
  // sequence proposes adapts to its acceptance rate r: the k in 0..max that
  // maximises the expected tokens per step (1 - r^(k+1)) / (1 - r) over its
  // cost 1 + spec_token_cost * k (an extra token's share of a decode step).
  // At k = 0 a sequence still proposes one token every 16th step, so a
  // rate that recovers is seen; each probe that fails doubles the wait (to
  // 256 steps), one that succeeds resets it. Proposals use batch slack only: they never
  // preempt, and take tokens from the prefill budget.
  int32_t spec_max_draft = 0;
  double spec_token_cost = 0.1;
  NgramOptions spec_ngram;
  // Who proposes: null for prompt lookup with spec_ngram; else a draft
  // model or self-speculation (model/draft_proposer.hpp), shared by the
  // policies of one EngineSet and called from their one owner only.
  std::shared_ptr<Proposer> spec_proposer;
  // Prompt chunks of a request that scores its prompt (each token a logits
  // row of n_vocab floats) are at most this long.
  int32_t score_chunk = 64;
};

// One sequence of a step. Full entries every step (not a vLLM-style diff for
// running sequences): the cost is a copy of each block table, a few hundred
// integers per step, negligible next to a forward pass.
struct ScheduledSeq {
  int64_t request_id = 0;
  std::vector<int32_t> tokens;       // [n_tokens] ids to feed this step
  int32_t n_past = 0;                // position of tokens[0]; KV already holds 0 .. n_past - 1
  std::vector<int32_t> block_table;  // covers n_past + n_tokens positions
  int32_t state_slot = -1;           // its recurrent-state slot (KvCacheManager::state_slot), -1: none
  bool need_logits = false;          // last prefill chunk or decode: sample a token
  bool is_prefill = false;           // feeding prompt (or recompute) tokens
  bool first_chunk = false;          // first entry since (re)admission
  int32_t n_draft = 0;               // the last n_draft tokens are proposals to verify (need_logits is set)
  bool score_prompt = false;         // a logits row for every token (prompt logprobs)

  // Logits rows this entry asks of the last stage: its last n_logits tokens.
  int32_t n_logits() const {
    if (score_prompt) return static_cast<int32_t>(tokens.size());
    return need_logits ? 1 + n_draft : 0;
  }
};

struct RejectedRequest {
  int64_t request_id = 0;
  Errc code = Errc::invalid_argument;
  std::string reason;
};

struct StepPlan {
  uint64_t step = 0;  // 0: nothing to run (update() not needed)
  std::vector<ScheduledSeq> seqs;
  std::vector<RejectedRequest> rejected;
  std::vector<int64_t> preempted;  // freed and requeued; executors drop their state
  // Set when the policy holds back to batch arrivals: call schedule() again
  // by then, or on the next add().
  std::optional<Clock::time_point> wait_until;

  int32_t n_tokens() const;
};

struct SeqOutput {
  int64_t request_id = 0;
  std::optional<int32_t> token;  // none for a non-final prefill chunk
  bool finished = false;         // EOS, stop string or a caller-side limit
  // Proposals accepted, in order, before `token` (a prefix of the entry's
  // n_draft proposals; `token` is then the target's own next token).
  std::vector<int32_t> accepted;
};

struct StepResult {
  std::vector<SeqOutput> outputs;  // one per plan entry, same order
};

enum class FinishReason : uint8_t { stop, length };

struct FinishedSeq {
  int64_t request_id = 0;
  FinishReason reason = FinishReason::stop;
};

enum class AddStatus : uint8_t { accepted, queue_full, duplicate_id };

struct SchedulerStats {
  uint64_t steps = 0;
  uint64_t admitted = 0;  // admissions, re-admissions after preemption included
  uint64_t preemptions = 0;
  uint64_t finished = 0;
  uint64_t rejected = 0;
  uint64_t cancelled = 0;
  uint64_t prompt_tokens = 0;      // tokens to prefill at admission
  uint64_t prefix_hit_tokens = 0;  // of those, found in the prefix cache
  uint64_t spec_proposed = 0;      // proposed tokens fed for verification
  uint64_t spec_accepted = 0;      // of those, accepted

  double prefix_hit_rate() const {
    return prompt_tokens == 0 ? 0.0 : static_cast<double>(prefix_hit_tokens) / prompt_tokens;
  }
};

// Order of work in one step, per priority class (interactive before batch),
// so interactive work claims KV first:
//  1. decodes of running sequences, 1 token each (plus proposals, with
//     speculation on, where batch slack allows): those preempted
//     max_preemptions times first, then oldest admission first;
//  2. prefill work: chunks of running sequences still prefilling and new
//     admissions, merged in rank order (below) under the token budget.
// The token budget is shared, but every running decode's token is set aside
// up front, so prefill never stalls streaming.
//
// Rank of prefill work (the length-aware multi-level queue): waiting requests
// sit in levels by prompt length (config.level_bounds), FIFO inside a level;
// the heads of the levels and the running prefills rank by effective level
// (the level minus one per level_aging waited since arrival), then arrival,
// then id. A short prompt therefore overtakes long prompts, both waiting and
// mid-prefill, while aging bounds how long a long prompt can be overtaken.
//
// KV: a running sequence that cannot get its blocks preempts the running,
// not yet scheduled sequence of lowest priority, most recently admitted,
// never one of higher priority than itself (possibly itself). A preempted
// sequence is freed and requeued at the front of its level with its generated
// tokens kept, to be recomputed (its full blocks stay in the prefix cache).
// No admission happens in a step that preempted. A sequence preempted
// max_preemptions times is passed over as a victim while any other of its
// priority can be taken; protected decodes are scheduled first, so the
// others are still candidates when they need blocks. (Only when every
// candidate is protected is one preempted again, so progress is kept; only
// kv_demand_fraction < 1, a wrong output estimate or several engines sharing
// the pool can run it out at all.)
//
// Admission (KV demand): a request is admitted when its first chunk, and the
// blocks it may still need (prompt + kv_demand_fraction * expected output),
// fit beside the blocks the running sequences may still need and the
// watermark (for a long request, the short share if that is larger); unless
// nothing else runs (then the first chunk is enough). A long request that does not fit closes
// admission to long requests for the step, not to short ones, which are
// then taken in rank order from anywhere in the queue.
//
// Lengths: a sequence finishes (`length`) at max_new_tokens or when prompt +
// output reach max_total_tokens() = min(context_length, KV capacity); so a
// sequence running alone always fits, and a prompt that leaves no room for
// one generated token is rejected. Hence no deadlock: the oldest running
// sequence of the highest priority can always get its blocks.
//
// Not thread-safe: one owner (the scheduler actor) calls everything.
class SchedulerPolicy {
 public:
  // `kv` must outlive the policy; the policy is its only writer. Throws
  // Errc::invalid_argument for an inconsistent config.
  SchedulerPolicy(const SchedulerConfig& config, KvCacheManager& kv);

  // Queues a request. queue_full when max_waiting requests already wait.
  // A request that can never run (empty, longer than the context or the KV
  // capacity) is accepted here and answered in the next plan's `rejected`.
  AddStatus add(Request request);
  // Forgets a request wherever it is and frees its KV at once. A step in
  // flight that contains it is fine: update() skips it.
  bool cancel(int64_t request_id);
  // Preempts a running sequence now, as schedule() does under KV pressure
  // (freed, requeued for recompute), for a caller that shares the KV manager
  // between policies and picks victims across them. False when it is not
  // running or a step is in flight.
  bool preempt(int64_t request_id);

  // The next step (see the rules above). kv_reserve: KV blocks admissions
  // must leave free for sequences outside this policy (other policies that
  // share the KV manager need them to grow), on top of the watermark.
  StepPlan schedule(Clock::time_point now, int32_t kv_reserve = 0);
  // Applies a step's outcome: commits the KV written, appends sampled tokens,
  // frees finished sequences (also those that reached max_new_tokens or the
  // length limit). Returns the sequences that finished.
  std::vector<FinishedSeq> update(const StepPlan& plan, const StepResult& result);

  bool has_work() const { return !seqs_.empty() || !pending_rejects_.empty(); }
  int32_t n_waiting() const { return n_waiting_; }
  int32_t n_running() const { return static_cast<int32_t>(running_.size()); }
  bool is_running(int64_t request_id) const;
  bool is_waiting(int64_t request_id) const;
  // Tokens of a live request: prompt followed by what it generated so far.
  const std::vector<int32_t>* tokens(int64_t request_id) const;
  // Longest prompt + output a request may reach: context and KV capacity.
  int32_t max_total_tokens() const { return limit_; }
  // KV blocks the running sequences may still claim (their demand minus what
  // they hold), and the demand of the waiting ones: what a caller sharing
  // the pool must leave them, and the edge's measure of KV pressure.
  int32_t kv_outstanding_blocks() const;
  int64_t kv_waiting_demand_blocks() const;
  // The share of its max_new_tokens a new request is expected to use at
  // most (from the requests finished so far); -1 before any finished.
  double output_fraction() const { return output_fraction_; }
  // Times a live request was preempted (0 for an unknown one).
  int32_t n_preemptions(int64_t request_id) const;
  const SchedulerStats& stats() const { return stats_; }
  const SchedulerConfig& config() const { return cfg_; }
  const KvCacheManager& kv() const { return kv_; }

  // Running sequences hold KV covering their computed tokens, waiting ones
  // hold none, queues and maps agree. Throws Errc::internal.
  void check_invariants() const;

 private:
  struct Seq {
    int64_t id = 0;
    Priority priority = Priority::interactive;
    Clock::time_point arrival{};
    int32_t max_new_tokens = 0;
    std::vector<int32_t> tokens;  // prompt + generated
    int32_t n_generated = 0;
    int32_t n_computed = 0;   // tokens whose KV is written
    int32_t prefill_end = 0;  // tokens to recompute after (re)admission
    int32_t level = 0;        // waiting-queue level (by length)
    int32_t n_prompt = 0;     // prompt tokens at arrival
    int32_t n_preempted = 0;
    bool is_short = false;    // prompt + max_new_tokens <= short_request_tokens
    bool speculative = false; // proposals allowed (config and request)
    bool score_prompt = false;
    bool whole = false;  // computed in one step (SchedulerConfig::whole_prompts)
    // Its prompt's chunk: a scored prompt's rows are n_vocab wide (at most
    // score_chunk of them a step); an embedding's are n_embd wide.
    int32_t chunk = 0;
    std::vector<int32_t> whole_spans;  // Request::whole_spans
    double spec_hits = 0.0;   // decayed counts of accepted and verified proposals
    double spec_trials = 0.0;
    int32_t spec_idle = 0;    // steps since the last proposal while k was 0
    int32_t spec_probe_every = 16;  // steps between probes at k = 0; doubles while they fail
    bool running = false;
    uint64_t admit_order = 0;     // larger = admitted more recently
    uint64_t scheduled_step = 0;  // step that last scheduled it
  };
  struct StepState;

  int32_t level_of(size_t n_tokens) const;
  int32_t effective_level(const Seq& s, Clock::time_point now) const;
  bool ranks_before(const Seq& a, const Seq& b, Clock::time_point now) const;
  std::deque<int64_t>& queue(Priority p, int32_t level);
  Seq* best_waiting(Priority p, Clock::time_point now, bool only_short);
  int32_t demand_blocks(const Seq& s) const;  // blocks the sequence may need in all

  void schedule_priority(Priority p, StepState& st);
  bool schedule_running(Seq& s, int32_t n_tokens, StepState& st);
  void schedule_decode(Seq& s, StepState& st);
  void propose(StepState& st);  // every speculating decode's proposals, in one call
  void forget(int64_t id);      // a sequence ended: the proposer drops it
  // A verified decode: rolls back the pages of rejected proposals, learns
  // the acceptance rate, counts.
  void note_verification(Seq& s, const ScheduledSeq& e, const SeqOutput& out);
  int32_t draft_length(Seq& s, const StepState& st) const;
  // Prompt tokens s computes this step from position `begin`, of the
  // `remaining` ones; never ending inside one of its whole_spans: a chunk
  // (chunked prefill, a scored prompt) or all of them (unchunked, an
  // encoder's whole prompt); more than prefill_budget means not this step.
  int32_t step_tokens(const Seq& s, int32_t begin, int32_t remaining, int32_t prefill_budget) const;
  bool try_admit(Seq& s, StepState& st);
  void emit(Seq& s, int32_t n_tokens, bool first, StepState& st);
  void preempt(Seq& s, StepState& st);
  void requeue(Seq& s);
  void remove_running(int64_t id);
  bool remove_waiting(const Seq& s);
  std::optional<Clock::time_point> batching_deadline(Clock::time_point now) const;

  SchedulerConfig cfg_;
  KvCacheManager& kv_;
  std::shared_ptr<Proposer> proposer_;  // null: speculation off
  std::unordered_map<int64_t, std::vector<int32_t>> proposals_;  // this step's, by sequence
  std::vector<ProposalQuery> queries_;
  std::vector<std::vector<int32_t>> proposed_;
  int32_t limit_ = 0;
  int32_t watermark_blocks_ = 0;
  int32_t short_blocks_ = 0;  // KV blocks long requests leave to short ones
  int32_t short_slots_ = 0;   // batch slots long requests leave to short ones
  std::unordered_map<int64_t, Seq> seqs_;  // waiting and running
  std::vector<int64_t> running_;           // in admission order
  // [priority][level], FIFO per level; preempted requests go to the front.
  std::vector<std::vector<std::deque<int64_t>>> waiting_;
  int32_t n_waiting_ = 0;
  std::vector<RejectedRequest> pending_rejects_;
  uint64_t step_ = 0;
  uint64_t in_flight_ = 0;  // step awaiting update(), 0 = none
  uint64_t admit_counter_ = 0;
  double output_fraction_ = -1.0;
  SchedulerStats stats_;
};

}  // namespace troupe
