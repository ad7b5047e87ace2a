// SchedulerPolicy's admission: what add() accepts or refuses, and how a
// waiting request takes its first prefill chunk (the step order is
// scheduler_policy.cpp's).
#include "actors/scheduler_policy.hpp"
#include "actors/scheduler_policy_step.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace troupe {
namespace {

// Why a request's whole spans cannot be scheduled ("" when they can): each a
// (begin, end) pair inside the prompt, no longer than a step.
std::string whole_spans_refusal(const std::vector<int32_t>& spans, size_t n_prompt, int32_t max_tokens_per_step) {
  for (size_t i = 0; i < spans.size(); i += 2) {
    const bool fits = i + 1 < spans.size() && spans[i] >= 0 && spans[i] < spans[i + 1] &&
                      spans[i + 1] <= static_cast<int64_t>(n_prompt);
    if (!fits) return "whole spans must be (begin, end) pairs inside the prompt";
    if (spans[i + 1] - spans[i] > max_tokens_per_step) {
      return "an image of " + std::to_string(spans[i + 1] - spans[i]) +
             " tokens, computed in one step, exceeds max_tokens_per_step " + std::to_string(max_tokens_per_step);
    }
  }
  return {};
}

}  // namespace

AddStatus SchedulerPolicy::add(Request request) {
  const bool pending = std::any_of(pending_rejects_.begin(), pending_rejects_.end(),
                                   [&](const RejectedRequest& r) { return r.request_id == request.id; });
  if (pending || seqs_.count(request.id) != 0) return AddStatus::duplicate_id;
  if (n_waiting_ >= cfg_.max_waiting) return AddStatus::queue_full;

  const size_t n = request.prompt.size();
  std::string why;
  Errc code = Errc::invalid_argument;
  if (n == 0) {
    why = "empty prompt";
  } else if (request.max_new_tokens < 1) {
    why = "max_new_tokens must be at least 1";
  } else if (n + (request.embed ? 0 : 1) > static_cast<size_t>(limit_)) {
    // +1: there must be room for at least one generated token.
    const bool by_kv = kv_.capacity_tokens() < cfg_.context_length;
    code = by_kv ? Errc::out_of_memory : Errc::invalid_argument;
    why = "prompt of " + std::to_string(n) + " tokens leaves no room to " + (request.embed ? "embed" : "generate") +
          " within " + (by_kv ? "the KV cache capacity of " : "context_length ") + std::to_string(limit_) + " tokens";
  }
  if (why.empty()) why = whole_spans_refusal(request.whole_spans, n, cfg_.max_tokens_per_step);
  if (!why.empty()) {
    pending_rejects_.push_back({.request_id = request.id, .code = code, .reason = req_name(request.id) + ": " + why});
    return AddStatus::accepted;
  }

  Seq s;
  s.id = request.id;
  s.priority = request.priority;
  s.arrival = request.arrival;
  s.max_new_tokens = request.max_new_tokens;
  s.tokens = std::move(request.prompt);
  s.prefill_end = static_cast<int32_t>(s.tokens.size());
  s.n_prompt = static_cast<int32_t>(s.tokens.size());
  s.is_short = static_cast<int64_t>(s.n_prompt) + s.max_new_tokens <= cfg_.short_request_tokens;
  s.level = level_of(s.tokens.size());
  s.speculative = request.speculative && cfg_.spec_max_draft > 0;
  s.score_prompt = request.score_prompt;
  s.whole = cfg_.whole_prompts;
  s.chunk =
      request.score_prompt && !request.embed ? std::min(cfg_.prefill_chunk, cfg_.score_chunk) : cfg_.prefill_chunk;
  s.whole_spans = std::move(request.whole_spans);
  queue(s.priority, s.level).push_back(s.id);
  ++n_waiting_;
  seqs_.emplace(s.id, std::move(s));
  return AddStatus::accepted;
}

int32_t SchedulerPolicy::step_tokens(const Seq& s, int32_t begin, int32_t remaining, int32_t prefill_budget) const {
  if (s.whole || !(cfg_.chunked_prefill || s.score_prompt)) return remaining;
  const int32_t n = std::min({remaining, s.chunk, prefill_budget});
  const int32_t end = begin + n;
  for (size_t i = 0; i + 1 < s.whole_spans.size(); i += 2) {
    const int32_t a = s.whole_spans[i], b = s.whole_spans[i + 1];
    // Stop before the block, or take all of it (more than the budget: not
    // this step; add() refused blocks larger than any step).
    if (a < end && end < b) return a > begin ? a - begin : b - begin;
  }
  return n;
}

bool SchedulerPolicy::try_admit(Seq& s, StepState& st) {
  const int32_t prefill_budget = st.budget - st.reserved_decode;
  // A scored prompt is computed in full: its cached prefix would have no
  // logits. An encoder's cached keys were computed without the tokens after them.
  const bool reuse = !s.score_prompt && !s.whole;
  const PrefixProbe probe = reuse ? kv_.probe_prefix(s.tokens) : PrefixProbe{};
  const int32_t remaining = static_cast<int32_t>(s.tokens.size()) - probe.n_tokens;
  const int32_t n = step_tokens(s, probe.n_tokens, remaining, prefill_budget);
  if (n > prefill_budget) return false;
  const int32_t new_blocks = kv_.n_blocks_needed(probe.n_tokens + n) - probe.n_blocks;
  const int32_t available = kv_.n_available_blocks() - probe.n_revived;
  // A long request leaves the short share free (the watermark counts in it:
  // both are room others may take).
  const int32_t keep = std::max(watermark_blocks_, s.is_short ? 0 : short_blocks_);
  const int32_t watermark = (running_.empty() ? 0 : keep) + st.kv_reserve;
  if (new_blocks + watermark > available) return false;
  const bool count_demand = cfg_.kv_demand_fraction > 0.0 || s.n_preempted >= cfg_.max_preemptions;
  if (count_demand && (!running_.empty() || st.kv_reserve > 0)) {
    // Its whole demand, beside what the running ones may still claim.
    const int32_t demand = std::max(new_blocks, demand_blocks(s) - probe.n_blocks);
    if (demand + watermark + kv_outstanding_blocks() > available) return false;
  }

  remove_waiting(s);
  const int32_t matched = reuse ? kv_.match_prefix(s.id, s.tokens) : 0;
  if (matched != probe.n_tokens || !kv_.reserve(s.id, n)) {
    throw Error(Errc::internal, "SchedulerPolicy: KV changed between probe and admission of " + req_name(s.id));
  }
  s.n_computed = matched;
  s.running = true;
  s.admit_order = ++admit_counter_;
  running_.push_back(s.id);
  ++stats_.admitted;
  stats_.prompt_tokens += s.tokens.size();
  stats_.prefix_hit_tokens += static_cast<uint64_t>(matched);
  emit(s, n, true, st);
  return true;
}

}  // namespace troupe
