// GBNF grammars compiled to byte grammars, held to outside labels: each
// string of tests/fixtures/gbnf_cases.json (tools/fixtures/make_gbnf_cases.py)
// is accepted exactly when Python's re.fullmatch of an equivalent regex, or
// json.loads, accepts it. Then the UTF-8 encoding of code-point classes,
// checked over every code point, and the errors, by line and column.
#include "grammar/gbnf.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.hpp"
#include "tests/grammar/grammar_test_util.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe::grammar {
namespace {

using test::accepts;

// The tokenizer's encoder, not the one gbnf.cpp uses: the two must agree.
std::string utf8(uint32_t cp) {
  std::string s;
  utf8::append(s, static_cast<char32_t>(cp));
  return s;
}

TEST(Gbnf, AcceptsWhatPythonAccepts) {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/gbnf_cases.json");
  const auto fixture = nlohmann::json::parse(in);
  size_t checked = 0;
  for (const auto& c : fixture.at("cases")) {
    const auto g = gbnf_grammar(c.at("gbnf").get<std::string>());
    for (const auto& d : c.at("documents")) {
      const std::string text = d.at("text").get<std::string>();
      EXPECT_EQ(accepts(g, text), d.at("valid").get<bool>()) << c.at("name").get<std::string>() << ": " << text;
      ++checked;
    }
  }
  EXPECT_GE(checked, 70u);
}

TEST(Gbnf, CodePointClassesOverEveryCodePoint) {
  // [lo-hi] accepts exactly the UTF-8 of the code points in it, for ranges
  // that cross every encoding-length edge and a surrogate gap; the negated
  // class accepts exactly the rest.
  const std::pair<uint32_t, uint32_t> ranges[] = {{0x41, 0x5A},     {0x70, 0x90},       {0x7FF, 0x800},
                                                  {0x3A9, 0x2FFF}, {0xD000, 0xE100},    {0xFFF0, 0x10010},
                                                  {0x80, 0x10FFFF}, {0x1F600, 0x1F64F}};
  for (const auto& [lo, hi] : ranges) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "root ::= [\\U%08X-\\U%08X]\n", lo, hi);
    const auto g = gbnf_grammar(buf);
    std::snprintf(buf, sizeof buf, "root ::= [^\\U%08X-\\U%08X]\n", lo, hi);
    const auto n = gbnf_grammar(buf);
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x20000 ? 1 : 61)) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      const bool in = cp >= lo && cp <= hi;
      ASSERT_EQ(accepts(g, utf8(cp)), in) << std::hex << cp << " in [" << lo << ", " << hi << "]";
      ASSERT_EQ(accepts(n, utf8(cp)), !in) << std::hex << cp << " not in [" << lo << ", " << hi << "]";
    }
    // Never a surrogate's or an overlong encoding, never a stray byte.
    for (const char* bad : {"\xED\xA0\x80", "\xC0\x80", "\xE0\x80\x80", "\xF4\x90\x80\x80", "\xFF", "\x80"}) {
      EXPECT_FALSE(accepts(g, bad));
      EXPECT_FALSE(accepts(n, bad));
    }
  }
}

void expect_error(const std::string& text, const std::string& words) {
  test::expect_refused([](const std::string& t) { gbnf_grammar(t); }, text, words);
}

TEST(Gbnf, ErrorsSayWhereAndWhat) {
  expect_error("root ::= item\n", "rule 'item' is used but never defined");
  expect_error("item ::= \"a\"\n", "no rule named 'root'");
  expect_error("root ::= \"a\"\nroot ::= \"b\"\n", "line 2, column 10: rule 'root' is defined twice");
  expect_error("root = \"a\"\n", "line 1, column 6: expected '::='");
  expect_error("root ::= \"abc\n", "unterminated string literal");
  expect_error("root ::= [ab\n", "unterminated character class");
  expect_error("root ::= [z-a]\n", "end before its start");
  expect_error("root ::= root \"x\" | \"y\"\n", "left-recursive");
  expect_error("root ::= <think> \"x\"\n", "token terminals");
  expect_error("root ::= \"a\"{3,1}\n", "n < m");
  expect_error("root ::= \"a\"{99999}\n", "above 10000");
  expect_error("root ::= (\"a\" | \"b\"\n", "expected ')'");
  expect_error("root ::= \"a\" )\n", "unexpected ')'");
  expect_error("root ::= \"\\q\"\n", "unknown escape");
  expect_error("root ::= [^\\U00000000-\\U0010FFFF]\n", "matches nothing");
  std::string deep = "root ::= ";
  for (int i = 0; i < 200; ++i) deep += "(";
  expect_error(deep, "nest deeper than 128");
}

TEST(Gbnf, LayoutCommentsAndContinuations) {
  // Newlines inside groups and after '|', comments anywhere, an empty
  // alternative, a rule used before it is defined.
  const auto g = gbnf_grammar(R"(# leading comment
root ::= greeting ( # a comment inside a group
    " " name
  )? "!"
greeting ::= "hi" |
  "hello" # trailing
name ::= | [A-Z] [a-z]*
)");
  EXPECT_TRUE(accepts(g, "hi!"));
  EXPECT_TRUE(accepts(g, "hello Ada!"));
  EXPECT_TRUE(accepts(g, "hi !"));  // the empty name
  EXPECT_FALSE(accepts(g, "hey!"));
  EXPECT_FALSE(accepts(g, "hello ada!"));
}

}  // namespace
}  // namespace troupe::grammar
