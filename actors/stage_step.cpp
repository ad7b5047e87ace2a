// run_stage_step: StageBatch -> BatchView -> ModelStage::forward.
#include "actors/stage_step.hpp"

#include <string>

#include "core/error.hpp"

namespace troupe {

TensorHandle run_stage_step(ModelStage& stage, TensorPool& pool, const StageBatch& batch, std::vector<BatchSeq>& seqs) {
  seqs.clear();
  for (const StageSeq& s : batch.seqs) {
    seqs.push_back({.n_tokens = s.n_tokens, .n_past = s.n_past, .block_table = s.block_table, .want_logits = s.want_logits});
  }
  const BatchView view{.tokens = batch.tokens, .seqs = seqs};
  const float* hidden_in = nullptr;
  if (!stage.is_first()) {
    const int64_t n_embd = stage.model().config().n_embd;
    if (!batch.hidden || batch.hidden->rows != view.n_tokens() || batch.hidden->cols != n_embd) {
      throw Error(Errc::internal, "hidden state of step " + std::to_string(batch.step) +
                                      " does not have shape [n_tokens, n_embd]");
    }
    hidden_in = batch.hidden->data;
  }
  const int64_t n_rows = stage.is_last() ? view.n_logit_rows() : view.n_tokens();
  TensorHandle out = pool.acquire(n_rows, stage.output_width());
  stage.forward(view, hidden_in, out->data);
  return out;
}

}  // namespace troupe
