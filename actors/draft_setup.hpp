// The proposer a pipeline's speculative decoding uses, from its config: a
// draft model or self-speculation (a DraftProposer with a CPU backend of
// its own), or null for prompt lookup (the scheduler policy's default).
#pragma once

#include <memory>

#include "actors/pipeline.hpp"
#include "model/proposer.hpp"

namespace troupe {

// Throws Error(invalid_argument) for a draft model whose vocabulary is not
// the target's (ids would mean other tokens), or draft_layers outside
// [1, n_layer); Error(io/...) when the draft model cannot be loaded.
// `threads`: the draft's kernel threads when config.draft_threads is 0.
std::shared_ptr<Proposer> make_draft_proposer(const PipelineConfig& config, const std::shared_ptr<const Model>& target,
                                              int32_t n_kv_blocks, int threads);

}  // namespace troupe
