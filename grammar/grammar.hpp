// A context-free grammar over bytes, the form every output constraint
// (a JSON schema, JSON mode, a GBNF grammar) compiles to before a
// GrammarMatcher walks it one byte at a time. Rules are alternatives of
// symbols; a symbol is a set of bytes or a reference to a rule. Repetition
// is written as rules (rep()), so the matcher knows only these two kinds.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::grammar {

// A set of byte values, 256 bits.
struct ByteSet {
  std::array<uint64_t, 4> bits{};

  bool has(uint8_t c) const { return (bits[c >> 6] >> (c & 63)) & 1u; }
  void add(uint8_t c) { bits[c >> 6] |= uint64_t{1} << (c & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (unsigned c = lo; c <= hi; ++c) add(static_cast<uint8_t>(c));
  }
  void add_all(const ByteSet& o) {
    for (size_t i = 0; i < 4; ++i) bits[i] |= o.bits[i];
  }
  void invert() {
    for (uint64_t& b : bits) b = ~b;
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
};

// One symbol of an alternative: a byte from `bytes`, or (rule >= 0) any
// string that rule derives.
struct Symbol {
  int32_t rule = -1;
  ByteSet bytes;
};
using Alternative = std::vector<Symbol>;

// The flat form the matcher walks: every alternative's symbols back to back,
// each alternative closed by an end marker, so a position in the grammar is
// one index.
struct FlatSymbol {
  static constexpr int32_t kBytes = -1;
  static constexpr int32_t kEnd = -2;
  int32_t rule = kEnd;  // >= 0: a reference; kBytes: `bytes`; kEnd: the alternative is done
  ByteSet bytes;
};

class Grammar {
 public:
  // Limits that keep a hostile schema or grammar from costing more than a
  // request should: rules and symbols in all.
  static constexpr size_t kMaxRules = 1u << 16;
  static constexpr size_t kMaxSymbols = 1u << 20;

  // A new rule with no alternatives yet (define() gives them); `name` only
  // names it in errors.
  int32_t declare(std::string name);
  void define(int32_t rule, std::vector<Alternative> alts);
  // declare + define.
  int32_t add(std::string name, std::vector<Alternative> alts);

  // Symbols ---------------------------------------------------------------
  static Symbol ref(int32_t rule) { return Symbol{.rule = rule, .bytes = {}}; }
  static Symbol bytes(const ByteSet& set) { return Symbol{.rule = -1, .bytes = set}; }
  static Symbol byte(uint8_t c);
  static Symbol range(uint8_t lo, uint8_t hi);
  // The bytes of `text`, one symbol each, appended to `alt`.
  static void append_literal(Alternative& alt, std::string_view text);
  static Alternative literal(std::string_view text);

  // A rule deriving `body` repeated min..max times (max < 0: unbounded).
  // Bounded counts become a chain of max - min optional rules, so large
  // bounds are refused by the rule limit rather than slow.
  Symbol rep(const Alternative& body, int32_t min, int32_t max, const std::string& name);

  // Checks the grammar and flattens it: every rule defined with at least
  // one alternative, the root set, no left recursion (a rule that can
  // reach itself without consuming a byte would send the matcher into an
  // endless expansion). Throws Error(invalid_argument) naming the rule.
  void finish(int32_t root);

  int32_t root() const { return root_; }
  const std::vector<FlatSymbol>& flat() const { return flat_; }
  // [rule] -> positions in flat() where its alternatives start.
  const std::vector<std::vector<int32_t>>& starts() const { return starts_; }
  size_t n_rules() const { return rules_.size(); }
  const std::string& rule_name(int32_t rule) const { return names_[static_cast<size_t>(rule)]; }

 private:
  void check_size() const;
  std::vector<bool> nullable_rules() const;
  void check_left_recursion(const std::vector<bool>& nullable) const;

  std::vector<std::vector<Alternative>> rules_;
  std::vector<std::string> names_;
  size_t n_symbols_ = 0;
  int32_t root_ = -1;
  std::vector<FlatSymbol> flat_;
  std::vector<std::vector<int32_t>> starts_;
};

}  // namespace troupe::grammar
