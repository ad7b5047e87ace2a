// One forward step's input: a batch of sequences, each contributing some new
// tokens (a prefill chunk or one decode token) at its own position.
#pragma once

#include <cstdint>
#include <span>

namespace troupe {

// Rows of a sequence's input given as embeddings, not token ids (a
// vision-language model's image features): new tokens [offset, offset +
// n_rows) of the step take data's rows in place of their tokens' embeddings.
struct InputEmbeds {
  int32_t offset = 0;
  int32_t n_rows = 0;
  const float* data = nullptr;  // [n_rows, n_embd] host memory
};

struct BatchSeq {
  int32_t n_tokens = 0;                 // new tokens of this sequence in this step
  int32_t n_past = 0;                   // tokens already in its KV cache
  std::span<const int32_t> block_table; // physical KV block per logical block
  // Logits rows for the last n_logits new tokens, in order: 1 samples the
  // next token; more verify proposed tokens (speculative decoding) or score
  // the prompt (prompt logprobs); 0 for a prefill chunk that samples nothing.
  int32_t n_logits = 1;
  // Its recurrent-state slot (models with recurrent layers: one per running
  // sequence, from KvCacheManager::state_slot), -1: none.
  int32_t state_slot = -1;
  // An encoder's pair input (a cross-encoder's query and document): the
  // position from which its tokens are of token type 1; -1: all type 0.
  int32_t type1_from = -1;
  // Image features in place of some new tokens' embeddings (first stage).
  std::span<const InputEmbeds> embeds;
  // [2k] (begin, end) positions of image blocks whose tokens see the whole
  // block, later ones too (Gemma 3); the step's new tokens reach every
  // block's end. Every stage reads them.
  std::span<const int32_t> open_spans;
};

struct BatchView {
  std::span<const int32_t> tokens;  // [n_tokens], sequences back to back (first stage)
  std::span<const BatchSeq> seqs;

  int64_t n_tokens() const {
    int64_t n = 0;
    for (const BatchSeq& s : seqs) n += s.n_tokens;
    return n;
  }
  int64_t n_logit_rows() const {
    int64_t n = 0;
    for (const BatchSeq& s : seqs) n += s.n_logits;
    return n;
  }
};

}  // namespace troupe
