// Prompt lookup (n-gram) proposals for speculative decoding: when the last
// few tokens of a sequence occurred before, in its prompt or its output,
// propose what followed them then. It needs no second model and pays where
// outputs copy their input: summaries, edits, code, repeated structure.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/proposer.hpp"

namespace troupe {

struct NgramOptions {
  int32_t min_n = 2;       // shortest suffix that may match
  int32_t max_n = 4;       // longest suffix tried (first)
  int32_t window = 4096;   // tokens searched back from the end
};

class NgramProposer : public Proposer {
 public:
  // Throws Error(invalid_argument) for 1 > min_n, min_n > max_n or window < 1.
  explicit NgramProposer(NgramOptions options = {});

  // Appends up to `k` tokens to `out` and returns how many: the tokens that
  // followed the most recent earlier occurrence of the longest suffix of
  // `tokens` (max_n down to min_n long). 0 when no suffix recurs.
  // tokens: [n] prompt followed by the output so far.
  int32_t propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out) const;

  const char* name() const override { return "ngram"; }
  void propose(std::span<const ProposalQuery> queries, std::vector<std::vector<int32_t>>& out) override;

  const NgramOptions& options() const { return options_; }

 private:
  NgramOptions options_;
};

}  // namespace troupe
