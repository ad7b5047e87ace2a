// run_stage_step: StageBatch -> BatchView -> ModelStage::forward.
#include "actors/stage_step.hpp"

#include <string>

#include "core/error.hpp"

namespace troupe {

namespace {

// An image's rows as the stage reads them, checked against the features
// they point into: a corrupt remote message must not read past a tensor.
InputEmbeds input_embeds(const EmbedRows& e, const StageSeq& s, int64_t n_embd) {
  const bool fits = e.rows && e.rows->cols == n_embd && e.first >= 0 && e.n_rows > 0 &&
                    int64_t{e.first} + e.n_rows <= e.rows->rows && e.offset >= 0 &&
                    int64_t{e.offset} + e.n_rows <= s.n_tokens;
  if (!fits) {
    throw Error(Errc::invalid_argument, "image rows [" + std::to_string(e.first) + ", +" + std::to_string(e.n_rows) +
                                            ") at token " + std::to_string(e.offset) + " do not fit the step's " +
                                            std::to_string(s.n_tokens) + " tokens or their features");
  }
  return {.offset = e.offset, .n_rows = e.n_rows, .data = e.rows->data + int64_t{e.first} * n_embd};
}

}  // namespace

TensorHandle run_stage_step(ModelStage& stage, TensorPool& pool, const StageBatch& batch, std::vector<BatchSeq>& seqs) {
  seqs.clear();
  // Image features reach only the first stage; the spans below point into
  // `embeds`, sized before any is taken.
  size_t n_embeds = 0;
  if (stage.is_first()) {
    for (const StageSeq& s : batch.seqs) n_embeds += s.embeds.size();
  }
  std::vector<InputEmbeds> embeds;
  embeds.reserve(n_embeds);
  const int64_t n_embd = stage.model().config().n_embd;
  for (const StageSeq& s : batch.seqs) {
    const size_t from = embeds.size();
    if (stage.is_first()) {
      for (const EmbedRows& e : s.embeds) embeds.push_back(input_embeds(e, s, n_embd));
    }
    seqs.push_back({.n_tokens = s.n_tokens,
                    .n_past = s.n_past,
                    .block_table = s.block_table,
                    .n_logits = s.n_logits,
                    .state_slot = s.state_slot,
                    .type1_from = s.type1_from,
                    .embeds = std::span<const InputEmbeds>(embeds).subspan(from, embeds.size() - from),
                    .open_spans = s.open_spans});
  }
  const BatchView view{.tokens = batch.tokens, .seqs = seqs};
  const float* hidden_in = nullptr;
  if (!stage.is_first()) {
    if (!batch.hidden || batch.hidden->rows != view.n_tokens() || batch.hidden->cols != n_embd) {
      throw Error(Errc::internal, "hidden state of step " + std::to_string(batch.step) +
                                      " does not have shape [n_tokens, n_embd]");
    }
    hidden_in = batch.hidden->data;
  }
  const int64_t n_rows = stage.has_head() ? view.n_logit_rows() : view.n_tokens();
  TensorHandle out = pool.acquire(n_rows, stage.output_width());
  stage.forward(view, hidden_in, out->data);
  return out;
}

StepLogits step_logits(const StageBatch& batch, TensorHandle logits, int64_t compute_ns) {
  StepLogits out{.step = batch.step, .engine = batch.engine, .logits = std::move(logits), .compute_ns = compute_ns};
  size_t begin = 0;  // the sequence's first token in batch.tokens
  for (const StageSeq& s : batch.seqs) {
    const auto n = static_cast<size_t>(s.n_tokens);
    for (int32_t j = s.n_tokens - s.n_logits; j < s.n_tokens; ++j) {
      out.rows.push_back(s.id);
      out.positions.push_back(s.n_past + j);
      const size_t next = begin + static_cast<size_t>(j) + 1;
      out.next_fed.push_back(j + 1 < s.n_tokens && next < batch.tokens.size() ? batch.tokens[next] : -1);
    }
    begin += n;
  }
  return out;
}

}  // namespace troupe
