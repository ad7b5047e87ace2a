// UTF-8 validation and lossy repair. The expected repairs are the Unicode
// Standard's own example of U+FFFD substitution of maximal subparts (chapter
// 3, table 3-8), which Python's errors="replace" also produces.
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/utf8.hpp"

namespace troupe {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(Utf8, SequenceLengths) {
  EXPECT_EQ(utf8::sequence_length("a", 0), 1u);
  EXPECT_EQ(utf8::sequence_length("\xC3\xA9", 0), 2u);          // é
  EXPECT_EQ(utf8::sequence_length("\xE2\x96\x81", 0), 3u);      // ▁
  EXPECT_EQ(utf8::sequence_length("\xF0\x9F\x8D\x95", 0), 4u);  // 🍕
  EXPECT_EQ(utf8::sequence_length("\xC0\xAF", 0), 0u);          // overlong
  EXPECT_EQ(utf8::sequence_length("\xED\xA0\x80", 0), 0u);      // surrogate
  EXPECT_EQ(utf8::sequence_length("\xF4\x90\x80\x80", 0), 0u);  // above U+10FFFF
  EXPECT_EQ(utf8::sequence_length("\xF0\x9F\x8D", 0), 0u);      // cut short
  EXPECT_EQ(utf8::sequence_length("\x80", 0), 0u);
}

TEST(Utf8, DecodeAndAppendRoundTrip) {
  for (const char32_t cp : {U'a', U'\u00e9', U'\u2581', U'\U0001F355', U'\U0010FFFF'}) {
    std::string s;
    utf8::append(s, cp);
    const size_t len = utf8::sequence_length(s, 0);
    ASSERT_EQ(len, s.size());
    EXPECT_EQ(utf8::decode_at(s, 0, len), cp);
  }
}

TEST(Utf8, FirstInvalid) {
  EXPECT_EQ(utf8::first_invalid("h\xC3\xA9llo"), 6u);
  EXPECT_EQ(utf8::first_invalid("ab\xFF" "cd"), 2u);
  EXPECT_EQ(utf8::first_invalid("ab\xE2\x82"), 2u);
  EXPECT_TRUE(utf8::is_valid(""));
  EXPECT_FALSE(utf8::is_valid("\xED\xBF\xBF"));
}

TEST(Utf8, MaximalSubpartsAsInTheUnicodeStandard) {
  // Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64.
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  const std::string want =
      "a" + kReplacement + kReplacement + kReplacement + "b" + kReplacement + "c" + kReplacement + kReplacement + "d";
  EXPECT_EQ(utf8::to_valid(in), want);
}

TEST(Utf8, IncompleteTailWaitsUnlessAtEnd) {
  std::string out;
  const std::string bytes = "ok\xF0\x9F\x8D";
  EXPECT_EQ(utf8::append_lossy(out, bytes, false), 2u);
  EXPECT_EQ(out, "ok");
  out.clear();
  EXPECT_EQ(utf8::append_lossy(out, bytes, true), bytes.size());
  EXPECT_EQ(out, "ok" + kReplacement);  // one maximal subpart, one replacement
  out.clear();
  // A tail that can never complete is replaced at once.
  EXPECT_EQ(utf8::append_lossy(out, "\xF0\x9F" "a", false), 3u);
  EXPECT_EQ(out, kReplacement + "a");
}

}  // namespace
}  // namespace troupe
