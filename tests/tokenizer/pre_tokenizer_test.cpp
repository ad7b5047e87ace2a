// Pre-tokenizer splits against Hugging Face `tokenizers` on a hard corpus
// (tests/fixtures/tokenizer_pretok.json, made by
// tools/fixtures/make_gguf_tokenizer_fixtures.py): our PCRE2 regexes must cut
// text exactly where HF's Oniguruma ones do.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tokenizer/pre_tokenizer.hpp"

namespace troupe {
namespace {

nlohmann::json load_fixture() {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/tokenizer_pretok.json");
  EXPECT_TRUE(in.good()) << "missing tests/fixtures/tokenizer_pretok.json";
  return nlohmann::json::parse(in);
}

class PreTokenizerVsHf : public testing::TestWithParam<std::string> {};

TEST_P(PreTokenizerVsHf, SplitsLikeHuggingFace) {
  const nlohmann::json fx = load_fixture();
  const auto& texts = fx.at("texts");
  const auto& splits = fx.at("splits").at(GetParam());
  ASSERT_EQ(texts.size(), splits.size());
  const PreTokenizer pre(GetParam());
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    const auto want = splits[i].get<std::vector<std::string>>();
    std::vector<std::string> got;
    for (const std::string_view piece : pre.split(text)) got.emplace_back(piece);
    EXPECT_EQ(got, want) << "case " << i << ": " << text;
  }
}

std::string test_name(const testing::TestParamInfo<std::string>& p) {
  std::string n = p.param;
  for (char& c : n) {
    if (c == '-') c = '_';
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(Names, PreTokenizerVsHf,
                         testing::Values("gpt-2", "llama3", "qwen2", "smollm", "gpt-4o", "tekken", "qwen35",
                                         "deepseek-v3", "seed-coder"),
                         test_name);

// Every GGUF pre name the fixture lists (transformers' GGUF table, the
// byte-level defaults, the digits-first families) splits the corpus as its
// pattern does in Hugging Face `tokenizers`.
TEST(PreTokenizer, EveryGgufNameSplitsAsItsPattern) {
  const nlohmann::json fx = load_fixture();
  const auto& texts = fx.at("texts");
  ASSERT_GE(fx.at("names").size(), 30u);
  for (const auto& [name, pattern] : fx.at("names").items()) {
    SCOPED_TRACE(name + " -> " + pattern.get<std::string>());
    const auto& splits = fx.at("splits").at(pattern.get<std::string>());
    const PreTokenizer pre(name);
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string text = texts[i].get<std::string>();  // the pieces view it
      const auto want = splits[i].get<std::vector<std::string>>();
      std::vector<std::string> got;
      for (const std::string_view piece : pre.split(text)) got.emplace_back(piece);
      ASSERT_EQ(got, want) << "case " << i;
    }
  }
}

TEST(PreTokenizer, AliasesShareTheirPattern) {
  const std::string text = "Hello  world's 12345\n\n  x";
  auto pieces = [&](const char* name) {
    std::vector<std::string> out;
    for (const std::string_view p : PreTokenizer(name).split(text)) out.emplace_back(p);
    return out;
  };
  EXPECT_EQ(pieces("default"), pieces("gpt-2"));
  EXPECT_EQ(pieces(""), pieces("gpt-2"));
  EXPECT_EQ(pieces("llama-bpe"), pieces("llama3"));
  EXPECT_NE(pieces("llama3"), pieces("qwen2"));  // "123" vs "1","2","3"
}

TEST(PreTokenizer, UnknownNameIsUnsupported) {
  try {
    PreTokenizer pre("mystery-bpe");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'mystery-bpe'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("supported: default, gpt-2,"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tekken"), std::string::npos) << msg;
  }
}

TEST(PreTokenizer, LongRunsCoverTheText) {
  // 200k characters of whitespace and digits: no regex stack trouble, and the
  // pieces still tile the input exactly.
  std::string text(100000, ' ');
  text += std::string(50000, '7') + "\n\t" + std::string(50000, '\n');
  for (const char* name : {"gpt-2", "llama3", "qwen2", "smollm"}) {
    const auto pieces = PreTokenizer(name).split(text);
    std::string joined;
    for (const std::string_view p : pieces) joined += p;
    EXPECT_EQ(joined, text) << name;
  }
}

}  // namespace
}  // namespace troupe
