// Walks a Grammar one byte at a time: the state is the set of parse stacks
// still alive (a pushdown automaton run in parallel over the grammar's
// ambiguity), each stack a chain of grammar positions shared with the
// others through an arena, so advancing copies nothing but the top.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/grammar.hpp"

namespace troupe::grammar {

class Matcher {
 public:
  // Stacks alive at once beyond which the grammar is refused as too
  // ambiguous (Error(invalid_argument)); JSON schemas keep a handful.
  static constexpr size_t kMaxStacks = 1024;

  // The grammar must be finish()ed.
  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // Advances over `bytes` and returns true, or returns false and leaves the
  // state as it was when some byte is not allowed.
  bool accept(std::string_view bytes);
  // The input so far is a whole sentence of the grammar.
  bool can_end() const;
  // ... and nothing may follow it.
  bool done() const { return can_end() && stacks_.size() == 1; }
  // No byte and no end: the state is dead (never after a successful accept).
  bool dead() const { return stacks_.empty(); }
  // The bytes some stack can take next.
  ByteSet next_bytes() const { return next_bytes(stacks_); }

  // For walks that try many continuations from one state (TokenTrie):
  // stacks are node ids into the shared arena; -1 is the empty stack (the
  // sentence may end). A mark() / release() pair frees what advance()
  // allocated in between.
  using Stacks = std::vector<int32_t>;
  const Stacks& stacks() const { return stacks_; }
  // out = the stacks of `in` advanced over byte c (deduplicated).
  void advance(const Stacks& in, uint8_t c, Stacks& out);
  ByteSet next_bytes(const Stacks& in) const;
  size_t mark() const { return nodes_.size(); }
  void release(size_t mark) { nodes_.resize(mark); }
  // A canonical description of `in` (each stack's positions, top to
  // bottom, stacks sorted): equal keys, equal futures.
  void key(const Stacks& in, std::vector<int32_t>& out) const;

 private:
  struct Node {
    int32_t pos;     // a byte symbol in flat() for the top; a return position below it
    int32_t parent;  // the node below, -1 at the bottom
  };
  int32_t push(int32_t pos, int32_t parent);
  // Adds to `out` every stack whose top is a byte symbol reached from
  // `pos` (expanding references, popping finished alternatives).
  void expand(int32_t pos, int32_t parent, Stacks& out, int depth);
  void dedupe(Stacks& s) const;
  void compact();

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  Stacks stacks_;
  Stacks scratch_;
  size_t compact_at_ = 1u << 16;
};

}  // namespace troupe::grammar
