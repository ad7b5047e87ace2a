// The merge step of BPE, shared by the GGUF byte-level tokenizer and
// tokenizer.json's BPE model: adjacent symbol pairs merge by rank, lowest
// first and leftmost on ties, until no pair in the table is left.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace troupe {

class BpeMerges {
 public:
  struct Merge {
    int32_t rank;  // lower merges first
    int32_t id;    // the merged token
  };

  // Adds the pair (left, right) -> merged with the next rank. A pair already
  // present keeps its first rank (llama.cpp) or takes the new one when
  // keep_last is set (Hugging Face builds its table so).
  void add(int32_t left, int32_t right, int32_t merged, bool keep_last = false);
  const Merge* find(int32_t left, int32_t right) const;
  size_t size() const { return merges_.size(); }

  // Merges symbols (token ids) in place.
  void apply(std::vector<int32_t>& symbols) const;

 private:
  std::unordered_map<uint64_t, Merge> merges_;  // key: left id << 32 | right id
  int32_t next_rank_ = 0;
};

}  // namespace troupe
