// Running fixture inputs through one whole-model embedding stage (an
// encoder's or a classifier's rows): shared by the embedding, reranker and
// causal-reranker tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu_backend.hpp"
#include "model/batch.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"

namespace troupe::test {

// One input of a batch: its ids, how many of its last rows come back, and
// where its token type 1 begins (-1: none).
struct StageInput {
  std::vector<int32_t> ids;
  int32_t n_rows = 0;
  int32_t type1_from = -1;
};

// Every input in one batch (KV pages of `block` tokens): each input's rows
// [n_rows, output_width], in order.
inline std::vector<std::vector<float>> stage_rows(const std::shared_ptr<const Model>& model,
                                                  const std::vector<StageInput>& inputs, int32_t block = 16) {
  int64_t n_tokens = 0;
  int32_t n_blocks = 0;
  for (const StageInput& in : inputs) {
    n_tokens += static_cast<int64_t>(in.ids.size());
    n_blocks += (static_cast<int32_t>(in.ids.size()) + block - 1) / block;
  }
  CpuBackend backend({.n_threads = 2});
  ModelStage stage(model, backend,
                   {.max_tokens = n_tokens,
                    .max_seqs = static_cast<int64_t>(inputs.size()),
                    .n_kv_blocks = n_blocks,
                    .kv_block_size = block,
                    .embedding_output = true});
  const int64_t width = stage.output_width();
  std::vector<std::vector<int32_t>> tables(inputs.size());
  std::vector<BatchSeq> seqs;
  std::vector<int32_t> tokens;
  int32_t next_block = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto n = static_cast<int32_t>(inputs[i].ids.size());
    for (int32_t b = 0; b * block < n; ++b) tables[i].push_back(next_block++);
    seqs.push_back({.n_tokens = n,
                    .n_past = 0,
                    .block_table = tables[i],
                    .n_logits = inputs[i].n_rows,
                    .type1_from = inputs[i].type1_from});
    tokens.insert(tokens.end(), inputs[i].ids.begin(), inputs[i].ids.end());
  }
  const BatchView view{.tokens = tokens, .seqs = seqs};
  std::vector<float> rows(static_cast<size_t>(view.n_logit_rows() * width));
  stage.forward(view, nullptr, rows.data());
  std::vector<std::vector<float>> out;
  auto at = rows.begin();
  for (const StageInput& in : inputs) {
    out.emplace_back(at, at + in.n_rows * width);
    at += in.n_rows * width;
  }
  return out;
}

}  // namespace troupe::test
