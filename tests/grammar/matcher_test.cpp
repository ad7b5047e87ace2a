// The byte-level matcher on small grammars written by hand, and the
// checks finish() makes before a grammar may be walked.
#include "grammar/matcher.hpp"

#include <gtest/gtest.h>

#include <string>

#include "core/error.hpp"
#include "grammar/json_rules.hpp"
#include "tests/grammar/grammar_test_util.hpp"

namespace troupe::grammar {
namespace {

using test::accepts;

// S ::= "a" S "b" | ""   (a^n b^n: needs the stack, not just states)
std::shared_ptr<const Grammar> anbn() {
  auto g = std::make_shared<Grammar>();
  const int32_t s = g->declare("S");
  Alternative nest = Grammar::literal("a");
  nest.push_back(Grammar::ref(s));
  Grammar::append_literal(nest, "b");
  g->define(s, {nest, {}});
  g->finish(s);
  return g;
}

TEST(GrammarMatcher, NestedRuleNeedsItsStack) {
  const auto g = anbn();
  EXPECT_TRUE(accepts(g, ""));
  EXPECT_TRUE(accepts(g, "ab"));
  EXPECT_TRUE(accepts(g, "aaabbb"));
  EXPECT_FALSE(accepts(g, "aab"));
  EXPECT_FALSE(accepts(g, "abb"));
  EXPECT_FALSE(accepts(g, "ba"));
  Matcher m(g);
  EXPECT_TRUE(m.accept("aa"));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept("c"));  // refused: the state stays where it was
  EXPECT_TRUE(m.accept("bb"));
  EXPECT_TRUE(m.done());
}

TEST(GrammarMatcher, NextBytesAreWhatSomeStackTakes) {
  Matcher m(anbn());
  ByteSet b = m.next_bytes();
  EXPECT_TRUE(b.has('a'));
  EXPECT_FALSE(b.has('b'));
  ASSERT_TRUE(m.accept("a"));
  b = m.next_bytes();
  EXPECT_TRUE(b.has('a'));
  EXPECT_TRUE(b.has('b'));
}

TEST(GrammarMatcher, LeftRecursionIsRefused) {
  Grammar g;
  const int32_t s = g.declare("list");
  Alternative left{Grammar::ref(s)};
  Grammar::append_literal(left, "x");
  g.define(s, {left, Grammar::literal("x")});
  try {
    g.finish(s);
    FAIL() << "left recursion accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("left-recursive"), std::string::npos) << e.what();
  }
  // Through a nullable rule too: A ::= B A "x" | "y", B ::= "" | "b".
  Grammar h;
  const int32_t a = h.declare("A");
  const int32_t b = h.add("B", {{}, Grammar::literal("b")});
  Alternative via{Grammar::ref(b), Grammar::ref(a)};
  Grammar::append_literal(via, "x");
  h.define(a, {via, Grammar::literal("y")});
  EXPECT_THROW(h.finish(a), Error);
}

TEST(GrammarMatcher, UndefinedRulesAndEmptyRepetitionBodiesAreRefused) {
  Grammar g;
  const int32_t s = g.declare("S");
  const int32_t t = g.declare("T");  // never defined
  g.define(s, {{Grammar::ref(t)}});
  EXPECT_THROW(g.finish(s), Error);
  // A repeated body that can be empty would repeat forever without a byte.
  Grammar h;
  const int32_t e = h.add("E", {{}, Grammar::literal("e")});
  const Symbol star = h.rep({Grammar::ref(e)}, 0, -1, "E*");
  const int32_t root = h.add("root", {{star}});
  EXPECT_THROW(h.finish(root), Error);
}

TEST(GrammarMatcher, RepetitionBounds) {
  auto g = std::make_shared<Grammar>();
  const Symbol r = g->rep(Grammar::literal("ab"), 2, 4, "ab");
  const int32_t root = g->add("root", {{r}});
  g->finish(root);
  EXPECT_FALSE(accepts(g, "ab"));
  EXPECT_TRUE(accepts(g, "abab"));
  EXPECT_TRUE(accepts(g, "ababab"));
  EXPECT_TRUE(accepts(g, "abababab"));
  EXPECT_FALSE(accepts(g, "ababababab"));
  EXPECT_FALSE(accepts(g, "aba"));
}

TEST(GrammarMatcher, RightRecursionKeepsTheStackFlat) {
  // A long JSON string: the repetition is a tail call, so the state's size
  // does not grow with the string, and the arena is compacted.
  auto g = std::make_shared<Grammar>();
  JsonRules json(*g);
  g->finish(json.document(json.string()));
  Matcher m(g);
  ASSERT_TRUE(m.accept("\""));
  std::vector<int32_t> key_before, key_after;
  m.key(m.stacks(), key_before);
  for (int i = 0; i < 200000; ++i) ASSERT_TRUE(m.accept(i % 7 == 0 ? "\\n" : "x"));
  m.key(m.stacks(), key_after);
  EXPECT_EQ(key_before, key_after);
  EXPECT_LT(m.mark(), size_t{1} << 18);  // compacted, not 200000 * nodes a byte
  ASSERT_TRUE(m.accept("\""));
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarMatcher, IntegerRangesExactly) {
  // Every integer in [-1500, 1500] for ranges with and without bounds.
  struct Range {
    std::optional<int64_t> lo, hi;
  };
  const Range ranges[] = {{0, 150},       {-5, 100},          {-1234, 987},    {7, 7},          {-300, -20},
                          {std::nullopt, 12}, {95, std::nullopt}, {-999, std::nullopt}, {std::nullopt, -10}, {1, 1000}};
  for (const Range& r : ranges) {
    auto g = std::make_shared<Grammar>();
    JsonRules json(*g);
    const int32_t v = json.integer_range(r.lo, r.hi);
    g->finish(g->add("root", {{Grammar::ref(v)}}));
    for (int64_t n = -1500; n <= 1500; ++n) {
      const bool in = (!r.lo || n >= *r.lo) && (!r.hi || n <= *r.hi);
      ASSERT_EQ(accepts(g, std::to_string(n)), in)
          << n << " in [" << (r.lo ? std::to_string(*r.lo) : "-inf") << ", " << (r.hi ? std::to_string(*r.hi) : "inf")
          << "]";
    }
    EXPECT_FALSE(accepts(g, "007"));
    EXPECT_FALSE(accepts(g, "+7"));
  }
}

TEST(GrammarMatcher, UnboundedIntegersStopAtSixteenDigits) {
  auto g = std::make_shared<Grammar>();
  JsonRules json(*g);
  g->finish(g->add("root", {{Grammar::ref(json.integer())}}));
  EXPECT_TRUE(accepts(g, "1234567890123456"));
  EXPECT_FALSE(accepts(g, "12345678901234567"));
  EXPECT_TRUE(accepts(g, "-0"));
}

}  // namespace
}  // namespace troupe::grammar
