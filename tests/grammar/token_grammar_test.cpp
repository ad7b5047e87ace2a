// The token-level grammar: the trie walk's mask must equal asking
// allows() token by token, in every state of a generation; end tokens
// only where the document may end; cached masks equal fresh ones.
#include "grammar/token_grammar.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "core/error.hpp"
#include "grammar/json_schema.hpp"

namespace troupe::grammar {
namespace {

// A byte-level vocabulary: every single byte, JSON-ish pieces, and random
// strings over JSON's punctuation and letters, as a BPE vocab has them;
// id 0 a control token, the last id the end token.
struct Vocab {
  std::vector<std::string> bytes;
  std::vector<bool> text;
  int32_t eos = 0;
};

Vocab make_vocab() {
  Vocab v;
  v.bytes.push_back("<s>");
  v.text.push_back(false);
  for (int c = 0; c < 256; ++c) {
    v.bytes.emplace_back(1, static_cast<char>(c));
    v.text.push_back(true);
  }
  for (const char* p : {"{\"", "\":", "\",", "\"}", "true", "false", "null", " {", "{\n", "  ", "\n  \"", "12", "-1",
                        "0.", "e+", "name", "\"name\"", "age", "\": ", ", \"", "}\n", "[\"", "\"]", "\\u00", "é", "日本", "bc", "ok"}) {
    v.bytes.emplace_back(p);
    v.text.push_back(true);
  }
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\":, \n0123456789.-eEabnrtlsuf\\";
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int len = 1 + static_cast<int>(rng() % 6);
    for (int k = 0; k < len; ++k) s.push_back(alphabet[rng() % alphabet.size()]);
    v.bytes.push_back(s);
    v.text.push_back(true);
  }
  v.bytes.push_back("</s>");
  v.text.push_back(false);
  v.eos = static_cast<int32_t>(v.bytes.size() - 1);
  return v;
}

TEST(TokenGrammar, MaskEqualsTokenByTokenChecks) {
  const Vocab v = make_vocab();
  auto trie = std::make_shared<const TokenTrie>(v.bytes, v.text, std::vector<int32_t>{v.eos});
  const auto g = json_schema_grammar(R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120},
      "tags":{"type":"array","items":{"enum":["a","bc"]},"maxItems":2},"ok":{"type":"boolean"}},
      "required":["name","age"],"additionalProperties":false})");
  TokenGrammar tg(g, trie);
  // Walk a document token by token, checking the mask in every state.
  const std::vector<std::string> pieces = {"{\"", "name", "\":", "\"", "A", "é", "\"", ",", " \"", "age", "\": ",
                                           "12", ",", "\"", "t", "a", "g", "s", "\":", "[\"", "a", "\"", ",", "\"",
                                           "bc", "\"]", ",", "\"", "ok", "\":", "true", "}", "\n"};
  std::vector<float> logits(v.bytes.size());
  size_t states = 0;
  for (const std::string& piece : pieces) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    tg.mask(logits);
    size_t allowed = 0;
    for (size_t t = 0; t < logits.size(); ++t) {
      const bool by_mask = std::isfinite(logits[t]);
      ASSERT_EQ(by_mask, tg.allows(static_cast<int32_t>(t))) << "state " << states << ", token '" << v.bytes[t] << "'";
      allowed += by_mask ? 1 : 0;
    }
    EXPECT_GT(allowed, 0u);
    EXPECT_LT(allowed, logits.size());
    EXPECT_FALSE(tg.allows(0));  // a control token is never text
    EXPECT_EQ(tg.allows(v.eos), tg.can_end());
    const auto it = std::find(v.bytes.begin(), v.bytes.end(), piece);
    ASSERT_NE(it, v.bytes.end()) << piece;
    const auto id = static_cast<int32_t>(it - v.bytes.begin());
    ASSERT_TRUE(tg.allows(id)) << "piece " << states << " '" << piece << "'";
    tg.accept(id);
    ++states;
  }
  EXPECT_TRUE(tg.can_end());
  EXPECT_TRUE(tg.allows(v.eos));
  EXPECT_GT(tg.stats().walks, 10u);
}

TEST(TokenGrammar, CachedMasksEqualFreshOnes) {
  const Vocab v = make_vocab();
  auto trie = std::make_shared<const TokenTrie>(v.bytes, v.text, std::vector<int32_t>{v.eos});
  const auto g = json_schema_grammar(R"({"type":"object","properties":{"s":{"type":"string"}},"required":["s"]})");
  TokenGrammar cached(g, trie);
  const int32_t x = 1 + 'x';  // the single-byte token "x"
  cached.accept(1 + '{');
  cached.accept(1 + '"');
  cached.accept(1 + 's');
  cached.accept(1 + '"');
  cached.accept(1 + ':');
  cached.accept(1 + '"');
  std::vector<float> a(v.bytes.size()), b(v.bytes.size());
  for (int i = 0; i < 20; ++i) {
    // Inside the string the state repeats: one walk, then cache hits.
    TokenGrammar fresh(g, trie);
    for (int32_t t : {1 + '{', 1 + '"', 1 + 's', 1 + '"', 1 + ':', 1 + '"'}) fresh.accept(t);
    for (int k = 0; k < i; ++k) fresh.accept(x);
    std::fill(a.begin(), a.end(), 0.0f);
    std::fill(b.begin(), b.end(), 0.0f);
    cached.mask(a);
    fresh.mask(b);
    ASSERT_EQ(a, b) << i;
    cached.accept(x);
  }
  EXPECT_EQ(cached.stats().walks, 1u);
  EXPECT_EQ(cached.stats().cache_hits, 19u);
}

TEST(TokenGrammar, RequestsOfOneGrammarShareTheirWalks) {
  const Vocab v = make_vocab();
  auto trie = std::make_shared<const TokenTrie>(v.bytes, v.text, std::vector<int32_t>{v.eos});
  const auto g = json_schema_grammar(R"({"type":"object","properties":{"s":{"type":"string"}},"required":["s"]})");
  auto shared = std::make_shared<MaskCache>();
  std::vector<float> a(v.bytes.size()), b(v.bytes.size());
  TokenGrammar first(g, trie, shared), second(g, trie, shared);
  for (int32_t t : {1 + '{', 1 + '"', 1 + 's', 1 + '"', 1 + ':', 1 + '"', 1 + 'x'}) {
    std::fill(a.begin(), a.end(), 0.0f);
    std::fill(b.begin(), b.end(), 0.0f);
    first.mask(a);
    second.mask(b);
    ASSERT_EQ(a, b);
    first.accept(t);
    second.accept(t);
  }
  EXPECT_EQ(second.stats().walks, 0u);  // every state was walked by the first already
  EXPECT_EQ(second.stats().cache_hits, 7u);
}

TEST(TokenGrammar, EndTokensOnlyWhereTheDocumentEnds) {
  const Vocab v = make_vocab();
  auto trie = std::make_shared<const TokenTrie>(v.bytes, v.text, std::vector<int32_t>{v.eos});
  TokenGrammar tg(json_object_grammar(), trie);
  EXPECT_FALSE(tg.allows(v.eos));
  tg.accept(1 + '{');
  EXPECT_FALSE(tg.allows(v.eos));
  EXPECT_THROW(tg.accept(v.eos), Error);
  tg.accept(1 + '}');
  EXPECT_TRUE(tg.allows(v.eos));
  EXPECT_FALSE(tg.done());  // trailing whitespace may still follow
  EXPECT_THROW(tg.accept(1 + 'x'), Error);
}

}  // namespace
}  // namespace troupe::grammar
