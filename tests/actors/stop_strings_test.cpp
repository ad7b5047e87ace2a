// StopStringMatcher: stop strings split across pieces, text held back only
// while it may still become a stop string, the earliest match winning.
#include "actors/stop_strings.hpp"

#include <gtest/gtest.h>

namespace troupe {
namespace {

// Feeds pieces; returns everything emitted (flush included unless stopped).
std::string run(StopStringMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) {
    out += m.push(p).text;
    if (m.stopped()) return out;
  }
  return out + m.flush();
}

TEST(StopStrings, NoStopsPassesEverythingThrough) {
  StopStringMatcher m({});
  EXPECT_EQ(m.push("abc").text, "abc");
  EXPECT_EQ(m.pending_bytes(), 0u);
  EXPECT_FALSE(m.stopped());
}

TEST(StopStrings, MatchInsideOnePiece) {
  StopStringMatcher m({"END"});
  const auto r = m.push("hello END world");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "hello ");
  EXPECT_EQ(r.stop, "END");
  EXPECT_TRUE(m.push("more").text.empty());
}

TEST(StopStrings, MatchAcrossPiecesHoldsBackThePrefix) {
  StopStringMatcher m({"the end"});
  auto r = m.push("and so th");
  EXPECT_EQ(r.text, "and so ");  // "th" may start "the end"
  EXPECT_EQ(m.pending_bytes(), 2u);
  r = m.push("e e");
  EXPECT_EQ(r.text, "");
  r = m.push("nd.");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

TEST(StopStrings, FalseStartIsReleased) {
  StopStringMatcher m({"the end"});
  EXPECT_EQ(m.push("the e").text, "");
  EXPECT_EQ(m.push("gg").text, "the egg");
  EXPECT_FALSE(m.stopped());
}

TEST(StopStrings, ReleasedOnFlush) {
  StopStringMatcher m({"\n\n"});
  EXPECT_EQ(run(m, {"line", "\n"}), "line\n");
}

TEST(StopStrings, EarliestMatchWins) {
  StopStringMatcher m({"cd", "bcdx", "b"});
  const auto r = m.push("abcd");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop, "b");
  EXPECT_EQ(r.text, "a");
}

TEST(StopStrings, OverlappingCandidates) {
  // "aab" must be found although "aa" first looked like a false start of "ab".
  StopStringMatcher m({"ab"});
  EXPECT_EQ(run(m, {"a", "a", "b", "c"}), "a");
  EXPECT_TRUE(m.stopped());
}

TEST(StopStrings, MultiByteTextStaysWhole) {
  StopStringMatcher m({"€x"});
  EXPECT_EQ(m.push("a€").text, "a");  // "€" (3 bytes) held whole
  EXPECT_EQ(m.push("y").text, "€y");
}

TEST(StopStrings, EmptyStopsAreIgnored) {
  StopStringMatcher m({"", "z"});
  EXPECT_EQ(m.push("abc").text, "abc");
}

}  // namespace
}  // namespace troupe
