// Proposals from a model: a smaller draft model with the target's
// vocabulary (`--draft MODEL`), or the target's own first L layers with
// its output head (self-speculation by layer skipping, `--draft-layers L`:
// no second model, only the KV of L layers). Greedy: the draft's argmax,
// k tokens one decode step at a time, every speculating sequence batched
// into each step.
//
// Each sequence's draft KV is kept between steps. A new query rolls it back
// to the longest prefix it shares with the query's tokens (the accepted
// proposals stay, the rejected ones go) and computes only the rest, so a
// decode costs the draft 1 + k single-token rows per sequence after its
// prompt was read once.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/backend.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "model/proposer.hpp"

namespace troupe {

struct DraftOptions {
  // Layers of `model` that draft: -1 all of them (a separate draft model),
  // L < n_layer the first L with the output head (self-speculation).
  int64_t n_layers = -1;
  int64_t n_kv_blocks = 256;   // draft KV pages; sequences that do not fit get no proposals
  int64_t kv_block_size = 16;
  int64_t max_tokens = 256;    // tokens per draft step (a long prompt is read in chunks)
  int64_t max_seqs = 64;       // sequences per draft step
  // Proposer::cost_per_token: the share of a target decode step one draft
  // token costs (make_draft_proposer: the draft's weight bytes over the
  // target's).
  double cost_per_token = 0.0;
};

class DraftProposer : public Proposer {
 public:
  // Throws Error(invalid_argument) for a layer count outside [1, n_layer]
  // or bad limits, Error(unsupported) for weights the backend cannot run.
  DraftProposer(std::shared_ptr<const Model> model, Backend& backend, DraftOptions options);

  const char* name() const override { return self_ ? "self" : "draft"; }
  void propose(std::span<const ProposalQuery> queries, std::vector<std::vector<int32_t>>& out) override;
  void forget(int64_t id) override;
  double cost_per_token() const override { return cost_; }

  int64_t n_layers() const { return stage_.last_layer(); }
  int32_t n_vocab() const { return static_cast<int32_t>(stage_.model().config().n_vocab); }
  int32_t n_cached(int64_t id) const;  // tokens of the sequence with draft KV (tests)
  int32_t n_free_blocks() const { return static_cast<int32_t>(free_.size()); }

 private:
  struct Seq {
    std::vector<int32_t> cached;  // tokens whose draft KV is written, in order
    std::vector<int32_t> blocks;
    uint64_t last_use = 0;
  };
  struct Feed {
    Seq* seq = nullptr;
    size_t query = 0;
    std::vector<int32_t> pending;  // tokens still to run
  };

  // Makes s's blocks cover n tokens, evicting idle sequences if need be.
  bool ensure_blocks(Seq& s, int64_t n, const std::vector<const Seq*>& busy);
  void shrink(Seq& s, int64_t n_tokens);
  // One draft forward over `feeds` (each its next chunk); pushes each
  // sequence's greedy next token when its pending tokens are all run.
  void step(std::vector<Feed*>& feeds, std::vector<std::vector<int32_t>>& out, const std::vector<int32_t>& k_of);

  ModelStage stage_;
  bool self_ = false;
  double cost_ = 0.0;
  int64_t block_size_;
  std::vector<int32_t> free_;
  std::unordered_map<int64_t, Seq> seqs_;
  uint64_t clock_ = 0;
  // Scratch of one forward.
  std::vector<int32_t> tokens_;
  std::vector<BatchSeq> batch_;
  std::vector<float> logits_;
};

}  // namespace troupe
