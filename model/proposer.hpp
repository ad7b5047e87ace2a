// Speculative decoding's proposers behind one interface: given a
// sequence's tokens so far, guess the next few, which the target model then
// verifies in one batched step (actors/scheduler_policy.hpp schedules them,
// Sampler::verify accepts or rejects). Plain classes, testable without
// actors: prompt lookup (model/ngram_proposer.hpp), and a draft model or
// the target's own first layers (model/draft_proposer.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace troupe {

struct ProposalQuery {
  int64_t id = 0;                   // the sequence (a proposer may keep state per sequence)
  std::span<const int32_t> tokens;  // [n] prompt followed by the output so far
  int32_t k = 0;                    // at most this many proposals
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // "ngram", "draft", "self": the label of its /metrics series.
  virtual const char* name() const = 0;
  // out[i] = up to queries[i].k proposed tokens after queries[i].tokens
  // (possibly none). One call per step for every sequence that speculates,
  // so a model-based proposer batches them.
  virtual void propose(std::span<const ProposalQuery> queries, std::vector<std::vector<int32_t>>& out) = 0;
  // The sequence ended: drop what is kept for it.
  virtual void forget(int64_t /*id*/) {}
  // What proposing one token costs, as a share of one decode step of the
  // target: ~0 for a lookup, the weight bytes read per token over the
  // target's for a model. The scheduler adds it to the cost of verifying
  // a token when it chooses how many to propose.
  virtual double cost_per_token() const { return 0.0; }
};

}  // namespace troupe
