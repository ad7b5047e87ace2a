// The byte-level pushdown walk: expand references until every stack's top
// is a byte set, take a byte, pop finished alternatives, expand again.
#include "grammar/matcher.hpp"

#include <algorithm>
#include <unordered_map>

#include "core/error.hpp"

namespace troupe::grammar {
namespace {

// Nesting of references expanded without a byte consumed: bounded by the
// grammar's depth since finish() refused left recursion, so this only
// guards the stack against absurdly deep (machine-made) grammars.
constexpr int kMaxExpandDepth = 4096;

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  if (!grammar_ || grammar_->root() < 0) throw Error(Errc::invalid_argument, "grammar: matcher over an unfinished grammar");
  for (int32_t start : grammar_->starts()[static_cast<size_t>(grammar_->root())]) expand(start, -1, stacks_, 0);
  dedupe(stacks_);
}

int32_t Matcher::push(int32_t pos, int32_t parent) {
  nodes_.push_back(Node{.pos = pos, .parent = parent});
  return static_cast<int32_t>(nodes_.size() - 1);
}

void Matcher::expand(int32_t pos, int32_t parent, Stacks& out, int depth) {
  if (depth > kMaxExpandDepth) throw Error(Errc::invalid_argument, "grammar: rules nest too deeply");
  const FlatSymbol& s = grammar_->flat()[static_cast<size_t>(pos)];
  if (s.rule == FlatSymbol::kBytes) {
    out.push_back(push(pos, parent));
    if (out.size() > kMaxStacks) throw Error(Errc::invalid_argument, "grammar: too ambiguous (over 1024 parses alive)");
    return;
  }
  if (s.rule == FlatSymbol::kEnd) {
    if (parent < 0) {
      out.push_back(-1);  // the root is complete
      return;
    }
    const Node below = nodes_[static_cast<size_t>(parent)];
    expand(below.pos, below.parent, out, depth + 1);
    return;
  }
  // A reference: its return position goes on the stack, then each
  // alternative of the rule is expanded above it. A reference that ends
  // its alternative returns straight to the node below (a tail call), so
  // right recursion (T ::= x T | "", what rep() writes) keeps the stack
  // flat instead of one node deeper per repetition.
  const bool tail = grammar_->flat()[static_cast<size_t>(pos + 1)].rule == FlatSymbol::kEnd;
  const int32_t ret = tail ? parent : push(pos + 1, parent);
  for (int32_t start : grammar_->starts()[static_cast<size_t>(s.rule)]) expand(start, ret, out, depth + 1);
}

void Matcher::dedupe(Stacks& s) const {
  // Two stacks with the same top position over the same node below are the
  // same parse; deeper duplicates are rare and only cost time.
  auto same = [&](int32_t a, int32_t b) {
    if (a < 0 || b < 0) return a == b;
    const Node& x = nodes_[static_cast<size_t>(a)];
    const Node& y = nodes_[static_cast<size_t>(b)];
    return x.pos == y.pos && x.parent == y.parent;
  };
  auto order = [&](int32_t a, int32_t b) {
    if (a < 0 || b < 0) return a < b;
    const Node& x = nodes_[static_cast<size_t>(a)];
    const Node& y = nodes_[static_cast<size_t>(b)];
    return x.pos != y.pos ? x.pos < y.pos : x.parent < y.parent;
  };
  if (s.size() < 2) return;
  std::sort(s.begin(), s.end(), order);
  s.erase(std::unique(s.begin(), s.end(), same), s.end());
}

void Matcher::advance(const Stacks& in, uint8_t c, Stacks& out) {
  out.clear();
  const auto& flat = grammar_->flat();
  for (int32_t top : in) {
    if (top < 0) continue;
    const Node n = nodes_[static_cast<size_t>(top)];
    if (!flat[static_cast<size_t>(n.pos)].bytes.has(c)) continue;
    expand(n.pos + 1, n.parent, out, 0);
  }
  dedupe(out);
}

ByteSet Matcher::next_bytes(const Stacks& in) const {
  ByteSet u;
  for (int32_t top : in) {
    if (top >= 0) u.add_all(grammar_->flat()[static_cast<size_t>(nodes_[static_cast<size_t>(top)].pos)].bytes);
  }
  return u;
}

bool Matcher::accept(std::string_view bytes) {
  Stacks cur = stacks_;
  for (char ch : bytes) {
    advance(cur, static_cast<uint8_t>(ch), scratch_);
    if (scratch_.empty()) return false;
    cur.swap(scratch_);
  }
  stacks_.swap(cur);
  if (nodes_.size() > compact_at_) compact();
  return true;
}

bool Matcher::can_end() const { return std::find(stacks_.begin(), stacks_.end(), -1) != stacks_.end(); }

void Matcher::key(const Stacks& in, std::vector<int32_t>& out) const {
  // Stacks sorted by their position lists, each list closed by -1.
  std::vector<std::vector<int32_t>> lists;
  lists.reserve(in.size());
  for (int32_t top : in) {
    std::vector<int32_t>& l = lists.emplace_back();
    for (int32_t n = top; n >= 0; n = nodes_[static_cast<size_t>(n)].parent) l.push_back(nodes_[static_cast<size_t>(n)].pos);
  }
  std::sort(lists.begin(), lists.end());
  out.clear();
  for (const auto& l : lists) {
    out.insert(out.end(), l.begin(), l.end());
    out.push_back(-1);
  }
}

void Matcher::compact() {
  // Copies the nodes the live stacks reach into a fresh arena; every node
  // that only a dead parse or a finished walk used is dropped.
  std::vector<Node> fresh;
  std::unordered_map<int32_t, int32_t> moved;
  std::vector<int32_t> chain;
  auto copy = [&](int32_t top) -> int32_t {
    // Up the stack to the first node already copied (or the bottom), then
    // copy back down, so a deep stack needs no deep recursion.
    chain.clear();
    int32_t n = top;
    while (n >= 0 && !moved.contains(n)) {
      chain.push_back(n);
      n = nodes_[static_cast<size_t>(n)].parent;
    }
    int32_t below = n < 0 ? -1 : moved.at(n);
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      fresh.push_back(Node{.pos = nodes_[static_cast<size_t>(*it)].pos, .parent = below});
      below = static_cast<int32_t>(fresh.size() - 1);
      moved.emplace(*it, below);
    }
    return below;
  };
  for (int32_t& top : stacks_) top = copy(top);
  nodes_.swap(fresh);
  compact_at_ = std::max<size_t>(1u << 16, nodes_.size() * 4);
}

}  // namespace troupe::grammar
