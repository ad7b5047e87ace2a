// What ModelStage::forward takes from a batch before it computes: the checks
// (a remote stage's batch is as untrusted as a client's), the attention
// view of each sequence, positions, token types, and image rows over their
// tokens' embeddings.
#include "model/model_stage.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace troupe {

void ModelStage::check_batch(const BatchView& batch) const {
  const int64_t n_tokens = batch.n_tokens();
  if (batch.seqs.empty() || n_tokens == 0) throw Error(Errc::invalid_argument, "empty batch");
  if (n_tokens > options_.max_tokens) {
    throw Error(Errc::invalid_argument, "batch of " + std::to_string(n_tokens) + " tokens exceeds the stage limit of " +
                                            std::to_string(options_.max_tokens));
  }
  if (static_cast<int64_t>(batch.seqs.size()) > options_.max_seqs) {
    throw Error(Errc::invalid_argument, "batch of " + std::to_string(batch.seqs.size()) +
                                            " sequences exceeds the stage limit of " +
                                            std::to_string(options_.max_seqs));
  }
  for (const BatchSeq& s : batch.seqs) {
    for (const InputEmbeds& e : s.embeds) {
      if (e.data == nullptr || e.offset < 0 || e.n_rows <= 0 || int64_t{e.offset} + e.n_rows > s.n_tokens) {
        throw Error(Errc::invalid_argument, "input embeddings at token " + std::to_string(e.offset) + " (" +
                                                std::to_string(e.n_rows) + " rows) outside the sequence's " +
                                                std::to_string(s.n_tokens) + " new tokens");
      }
    }
    const int64_t end = int64_t{s.n_past} + s.n_tokens;
    for (size_t i = 0; i < s.open_spans.size(); i += 2) {
      const bool ok = i + 1 < s.open_spans.size() && s.open_spans[i] >= (i > 0 ? s.open_spans[i - 1] : 0) &&
                      s.open_spans[i] < s.open_spans[i + 1] && s.open_spans[i + 1] > s.n_past &&
                      s.open_spans[i + 1] <= end;
      if (!ok) {
        throw Error(Errc::invalid_argument,
                    "open spans must be ordered (begin, end) pairs ending among the step's "
                    "tokens [" +
                        std::to_string(s.n_past) + ", " + std::to_string(end) + ")");
      }
    }
    if (s.type1_from >= 0 && model_->config().n_token_types < 2) {
      throw Error(Errc::invalid_argument, "a sequence asks for token type 1 but " + model_->config().name + " has " +
                                              std::to_string(model_->config().n_token_types) + " token type(s)");
    }
  }
  if (is_first() && static_cast<int64_t>(batch.tokens.size()) != n_tokens) {
    throw Error(Errc::invalid_argument, "batch has " + std::to_string(batch.tokens.size()) + " token ids for " +
                                            std::to_string(n_tokens) + " tokens");
  }
  const int64_t n_vocab = model_->config().n_vocab;
  if (is_first()) {
    for (int32_t t : batch.tokens) {
      if (t < 0 || t >= n_vocab) {
        throw Error(Errc::invalid_argument,
                    "token id " + std::to_string(t) + " outside the vocabulary of " + std::to_string(n_vocab));
      }
    }
  }
  // Learned positions exist only up to the table's length.
  const int64_t max_pos = model_->weights().pos_embd.data != nullptr ? model_->weights().pos_embd.n_out : 0;
  for (const BatchSeq& s : batch.seqs) {
    if (s.n_tokens <= 0 || s.n_past < 0) throw Error(Errc::invalid_argument, "sequence with no new tokens");
    if (s.n_logits < 0 || s.n_logits > s.n_tokens) {
      throw Error(Errc::invalid_argument, "a sequence of " + std::to_string(s.n_tokens) + " new tokens cannot want " +
                                              std::to_string(s.n_logits) + " logits rows");
    }
    const int64_t end = static_cast<int64_t>(s.n_past) + s.n_tokens;
    if (max_pos > 0 && end > max_pos) {
      throw Error(Errc::invalid_argument, "position " + std::to_string(end - 1) + " is past the model's " +
                                              std::to_string(max_pos) + " learned positions");
    }
    // An encoder's earlier keys depend on the later tokens: a chunk after the
    // first would attend to keys computed without it.
    if (!model_->config().causal && s.n_past != 0) {
      throw Error(Errc::invalid_argument,
                  "an encoder computes a sequence in one step, not from position " + std::to_string(s.n_past));
    }
    const int64_t need = (end + options_.kv_block_size - 1) / options_.kv_block_size;
    if (static_cast<int64_t>(s.block_table.size()) < need) {
      throw Error(Errc::invalid_argument, "block table of " + std::to_string(s.block_table.size()) +
                                              " blocks cannot hold " + std::to_string(end) + " tokens");
    }
    for (int64_t b = 0; b < need; ++b) {
      const int32_t id = s.block_table[static_cast<size_t>(b)];
      if (id < 0 || id >= options_.n_kv_blocks) {
        throw Error(Errc::invalid_argument, "KV block id " + std::to_string(id) + " outside the pool");
      }
    }
    if (state_slots_ > 0 && (s.state_slot < 0 || s.state_slot >= state_slots_)) {
      throw Error(Errc::invalid_argument, "recurrent-state slot " + std::to_string(s.state_slot) +
                                              " outside the stage's " + std::to_string(state_slots_) + " slots");
    }
  }
  // Two sequences of one step writing one slot would corrupt both.
  if (state_slots_ > 0) {
    for (size_t i = 0; i < batch.seqs.size(); ++i) {
      for (size_t j = i + 1; j < batch.seqs.size(); ++j) {
        if (batch.seqs[i].state_slot == batch.seqs[j].state_slot) {
          throw Error(Errc::invalid_argument, "two sequences of one step share recurrent-state slot " +
                                                  std::to_string(batch.seqs[i].state_slot));
        }
      }
    }
  }
}

void ModelStage::step_views(const BatchView& batch) {
  // Positions and the attention view of each sequence.
  const int64_t n_tokens = batch.n_tokens();
  seqs_scratch_.clear();
  pos_scratch_.clear();
  key_end_scratch_.resize(static_cast<size_t>(n_tokens));  // sized first: AttnSeq points into it
  int32_t row = 0;
  for (const BatchSeq& s : batch.seqs) {
    AttnSeq& a = seqs_scratch_.emplace_back(AttnSeq{.q_begin = row,
                                                    .n_q = s.n_tokens,
                                                    .n_past = s.n_past,
                                                    .block_table = s.block_table.data(),
                                                    .state_slot = s.state_slot});
    for (int32_t i = 0; i < s.n_tokens; ++i) pos_scratch_.push_back(s.n_past + i);
    if (!s.open_spans.empty()) {
      // A token inside an open block sees to the block's end, others themselves.
      int32_t* ends = key_end_scratch_.data() + row;
      for (int32_t i = 0; i < s.n_tokens; ++i) ends[i] = s.n_past + i + 1;
      for (size_t j = 0; j + 1 < s.open_spans.size(); j += 2) {
        for (int32_t p = std::max(s.open_spans[j], s.n_past); p < s.open_spans[j + 1]; ++p) {
          ends[p - s.n_past] = s.open_spans[j + 1];
        }
      }
      a.key_end = ends;
    }
    row += s.n_tokens;
  }
  // A pair's token types (an encoder's first stage): type 1 from type1_from on.
  types_scratch_.clear();
  const bool typed = is_first() && std::any_of(batch.seqs.begin(), batch.seqs.end(),
                                               [](const BatchSeq& s) { return s.type1_from >= 0; });
  if (typed) {
    for (const BatchSeq& s : batch.seqs) {
      for (int32_t i = 0; i < s.n_tokens; ++i) {
        types_scratch_.push_back(s.type1_from >= 0 && s.n_past + i >= s.type1_from ? 1 : 0);
      }
    }
  }
}

// Image features over their image tokens' embeddings (a vision-language
// model: LLaVA's masked_scatter into inputs_embeds), after the architecture's
// embedding step and its scaling, as transformers inserts them.
void ModelStage::put_input_embeds(const BatchView& batch, float* x) {
  const int64_t n_embd = model_->config().n_embd;
  int64_t row = 0;
  for (const BatchSeq& s : batch.seqs) {
    for (const InputEmbeds& e : s.embeds) {
      backend_.copy_from_host(x + (row + e.offset) * n_embd, e.data,
                              static_cast<size_t>(int64_t{e.n_rows} * n_embd) * sizeof(float));
    }
    row += s.n_tokens;
  }
}

}  // namespace troupe
