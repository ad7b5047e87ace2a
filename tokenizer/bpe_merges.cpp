// BPE merging over a linked list of symbols with a priority queue of
// candidate pairs; stale candidates (a side merged since) are skipped.
#include "tokenizer/bpe_merges.hpp"

#include <queue>

namespace troupe {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t left;  // symbol index
  int32_t right;
  int32_t left_id;
  int32_t right_id;
  int32_t merged_id;
};

struct CandidateOrder {
  // std::priority_queue pops the largest: lowest rank, then leftmost.
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void BpeMerges::add(int32_t left, int32_t right, int32_t merged, bool keep_last) {
  const Merge m{next_rank_++, merged};
  if (keep_last) merges_.insert_or_assign(pair_key(left, right), m);
  else merges_.emplace(pair_key(left, right), m);
}

const BpeMerges::Merge* BpeMerges::find(int32_t left, int32_t right) const {
  const auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeMerges::apply(std::vector<int32_t>& ids) const {
  if (ids.size() < 2) return;
  std::vector<Symbol> symbols;
  symbols.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto index = static_cast<int32_t>(i);
    symbols.push_back({ids[i], index - 1, index + 1, true});
  }
  symbols.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t left_id = symbols[static_cast<size_t>(left)].id;
    const int32_t right_id = symbols[static_cast<size_t>(right)].id;
    if (const Merge* m = find(left_id, right_id)) queue.push({m->rank, left, right, left_id, right_id, m->id});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int32_t>(i - 1), static_cast<int32_t>(i));

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = symbols[static_cast<size_t>(c.left)];
    Symbol& r = symbols[static_cast<size_t>(c.right)];
    if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id || r.id != c.right_id) continue;
    l.id = c.merged_id;
    r.alive = false;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<size_t>(r.next)].prev = c.left;
    try_add(l.prev, c.left);
    try_add(c.left, l.next);
  }
  ids.clear();
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    ids.push_back(symbols[static_cast<size_t>(i)].id);
  }
}

}  // namespace troupe
