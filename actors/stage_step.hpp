// One forward step of a ModelStage on a StageBatch: the part an in-process
// executor and a remote stage worker share. No actors here.
#pragma once

#include <vector>

#include "actors/messages.hpp"
#include "model/model_stage.hpp"

namespace troupe {

// Runs `batch` through `stage` into a buffer from `pool`: hidden states
// [n_tokens, n_embd], or logits [n_logit_rows, n_vocab] on the last stage.
// Throws Error: a hidden state of the wrong shape (internal), a batch past
// the stage's limits (invalid_argument), a device failure (unavailable).
// `seqs` is scratch kept by the caller between steps.
TensorHandle run_stage_step(ModelStage& stage, TensorPool& pool, const StageBatch& batch, std::vector<BatchSeq>& seqs);

// The last stage's message to the sampler: `logits` [n_logit_rows, n_vocab]
// of `batch`, with each row's request, position and next fed token.
StepLogits step_logits(const StageBatch& batch, TensorHandle logits, int64_t compute_ns);

}  // namespace troupe
