// BERT-style tokenizer.json files (WordPiece model, BertNormalizer,
// BertPreTokenizer, WordPiece decoder, Bert/Roberta/Template processing)
// against what Hugging Face's `tokenizers` computes
// (tests/fixtures/hf_wordpiece.json, made by
// tools/fixtures/make_wordpiece_tokenizer_fixtures.py from vocabularies it
// trains itself): ids, decoding, streaming, single normalizers and
// pre-tokenizers. Also what stays refused.
#include "tokenizer/wordpiece_tokenizer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tests/tokenizer/tokenizer_test_util.hpp"
#include "tokenizer/hf_normalizer.hpp"
#include "tokenizer/hf_pre_tokenizer.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/incremental_decoder.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe {
namespace {

using Ids = std::vector<int32_t>;
using nlohmann::json;

const json& wordpiece_fixture() { return test::fixture_json("hf_wordpiece.json"); }

// The variant's tokenizer.json with its vocabulary put back.
json wordpiece_json(size_t variant) {
  json j = wordpiece_fixture().at("tokenizers").at(variant).at("tokenizer_json");
  j["model"]["vocab"] = wordpiece_fixture().at("vocabs").at(j["model"]["vocab"].get<std::string>());
  return j;
}

// The fixture stores decode(ids) as null when it is "[CLS] " + the skipped
// text + " [SEP]" (empty parts left out).
std::string decoded_of(const json& c) {
  if (!c.at("decoded").is_null()) return c.at("decoded").get<std::string>();
  const std::string skip = c.at("decoded_skip").get<std::string>();
  return skip.empty() ? "[CLS] [SEP]" : "[CLS] " + skip + " [SEP]";
}

class WordPieceVariants : public testing::TestWithParam<size_t> {
 protected:
  const json& expected() const { return wordpiece_fixture().at("tokenizers").at(GetParam()); }
};

TEST_P(WordPieceVariants, EncodesLikeHuggingFace) {
  const auto tok = tokenizer_from_hf_json(wordpiece_json(GetParam()).dump());
  const json& corpus = wordpiece_fixture().at("corpus");
  for (const json& c : expected().at("cases")) {
    const std::string line = corpus.at(c.at("line").get<size_t>()).get<std::string>();
    SCOPED_TRACE("line " + c.at("line").dump() + ": " + line);
    const Ids ids = c.at("ids").get<Ids>();
    EXPECT_EQ(tok->encode(line, true, true), ids);
    ASSERT_GE(ids.size(), 2u);
    EXPECT_EQ(tok->encode(line, false, true), Ids(ids.begin() + 1, ids.end() - 1));
  }
}

TEST_P(WordPieceVariants, DecodesAndStreamsLikeHuggingFace) {
  const auto tok = tokenizer_from_hf_json(wordpiece_json(GetParam()).dump());
  for (const json& c : expected().at("cases")) {
    SCOPED_TRACE("line " + c.at("line").dump());
    const Ids ids = c.at("ids").get<Ids>();
    EXPECT_EQ(tok->decode(ids, true), c.at("decoded_skip").get<std::string>());
    EXPECT_EQ(tok->decode(ids, false), decoded_of(c));
    EXPECT_EQ(test::stream_decode(*tok, ids, true), c.at("decoded_skip").get<std::string>());
    EXPECT_EQ(test::stream_decode(*tok, ids, false), decoded_of(c));
  }
  // "##" pieces first, specials and unk in the middle, cleanup's punctuation.
  for (const json& c : expected().at("decode_cases")) {
    const Ids ids = c.at("ids").get<Ids>();
    SCOPED_TRACE("decode " + c.at("ids").dump());
    EXPECT_EQ(tok->decode(ids, false), c.at("decoded").get<std::string>());
    EXPECT_EQ(tok->decode(ids, true), c.at("decoded_skip").get<std::string>());
    EXPECT_EQ(test::stream_decode(*tok, ids, false), c.at("decoded").get<std::string>());
    EXPECT_EQ(test::stream_decode(*tok, ids, true), c.at("decoded_skip").get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixture, WordPieceVariants, testing::Range<size_t>(0, 7), [](const auto& p) {
  return wordpiece_fixture().at("tokenizers").at(p.param).at("name").template get<std::string>();
});

TEST(WordPieceFixtureFile, HasAllSevenVariants) { EXPECT_EQ(wordpiece_fixture().at("tokenizers").size(), 7u); }

// --- single components, as normalize_str / pre_tokenize_str give them ---

TEST(WordPieceComponents, NormalizersAndPreTokenizers) {
  test::expect_components(wordpiece_fixture().at("components"));
}

// --- small hand-written files ---

// [CLS] A [SEP] over a vocabulary where "unaffable" is un ##aff ##able.
json tiny_bert() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [
      {"id": 0, "content": "[UNK]", "special": true, "normalized": false},
      {"id": 1, "content": "[CLS]", "special": true, "normalized": false},
      {"id": 2, "content": "[SEP]", "special": true, "normalized": false}],
    "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true,
                   "strip_accents": null, "lowercase": true},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]},
    "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
              "max_input_chars_per_word": 100,
              "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "un": 3, "##aff": 4, "##able": 5, "a": 6, ".": 7,
                        "'": 8, "s": 9, "##s": 10}}})");
}

TEST(WordPieceTokenizer, GreedyLongestMatchAndUnkWholeWord) {
  const auto t = tokenizer_from_hf_json(tiny_bert().dump());
  EXPECT_EQ(t->encode("UnAffable", true, true), (Ids{1, 3, 4, 5, 2}));
  // "unaffablex": no piece covers the final x, so the whole word is unk.
  EXPECT_EQ(t->encode("unaffablex a.", false, true), (Ids{0, 6, 7}));
  EXPECT_EQ(t->encode("", true, true), (Ids{1, 2}));
  EXPECT_EQ(t->encode(" \t\n", false, true), Ids{});
  // Cleanup works on each piece: " '" alone is left as it is.
  EXPECT_EQ(t->decode(Ids{1, 3, 4, 5, 7, 8, 9, 2}, false), "[CLS] unaffable. ' s [SEP]");
  EXPECT_EQ(t->decode(Ids{1, 3, 4, 5, 7, 8, 9, 2}, true), "unaffable. ' s");
  EXPECT_EQ(t->bos(), 1);
  EXPECT_EQ(t->eos(), 2);
}

TEST(WordPieceTokenizer, StreamingGluesContinuingPieces) {
  const auto t = tokenizer_from_hf_json(tiny_bert().dump());
  IncrementalDecoder dec(*t, {.skip_special = true});
  EXPECT_EQ(dec.push(1), "");  // [CLS] skipped: the next piece still opens the text
  EXPECT_EQ(dec.push(3), "un");
  EXPECT_EQ(dec.push(4), "aff");
  EXPECT_EQ(dec.push(6), " a");
  EXPECT_EQ(dec.push(7), ".");
  EXPECT_EQ(dec.push(10), "s");
  EXPECT_EQ(dec.flush(), "");
  // After a flush the decoder starts over: no space before the first piece.
  EXPECT_EQ(dec.push(6), "a");
}

TEST(WordPieceTokenizer, LongWordIsOneUnk) {
  json j = tiny_bert();
  j["model"]["max_input_chars_per_word"] = 4;
  const auto t = tokenizer_from_hf_json(j.dump());
  EXPECT_EQ(t->encode("unaff unaffable", false, true), (Ids{0, 0}));
  j["model"]["max_input_chars_per_word"] = 5;
  EXPECT_EQ(tokenizer_from_hf_json(j.dump())->encode("unaff", false, true), (Ids{3, 4}));
}

TEST(WordPieceTokenizer, FolderWithBertConfig) {
  const auto dir = std::filesystem::path(TROUPE_BINARY_DIR) / "wordpiece_tokenizer_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tiny_bert().dump();
  std::ofstream(dir / "tokenizer_config.json") << R"({"do_lower_case": true, "unk_token": "[UNK]",
      "cls_token": "[CLS]", "sep_token": "[SEP]", "tokenize_chinese_chars": true, "strip_accents": null})";
  const HfTokenizer t = load_hf_tokenizer_files(dir.string());
  EXPECT_EQ(t.config.unk_id, 0);
  EXPECT_TRUE(t.config.add_bos);
  EXPECT_TRUE(t.config.add_eos);
  EXPECT_EQ(t.tokenizer->encode("UN", true, true), (Ids{1, 3, 2}));
}

TEST(WordPieceTokenizer, CleanupRulesInHuggingFaceOrder) {
  EXPECT_EQ(wordpiece_cleanup(" ."), ".");
  EXPECT_EQ(wordpiece_cleanup(" ' "), "'");
  EXPECT_EQ(wordpiece_cleanup(" do not"), " don't");
  EXPECT_EQ(wordpiece_cleanup("a , b ! c ? 's 're 've 'm n't"), "a, b! c?'s're've'mn't");
}

// --- what stays refused ---

TEST(WordPieceErrors, UnsupportedConstructsNameTheirJsonPath) {
  json word_level = tiny_bert();
  word_level["model"] = json::parse(R"({"type": "WordLevel", "unk_token": "[UNK]", "vocab": {"[UNK]": 0}})");
  json nmt = tiny_bert();
  nmt["normalizer"] = json::parse(R"({"type": "Nmt"})");
  json scripts = tiny_bert();
  scripts["pre_tokenizer"] = json::parse(R"({"type": "UnicodeScripts"})");
  json byte_level = tiny_bert();
  byte_level["decoder"] = json::parse(R"({"type": "ByteLevel"})");
  json no_decoder = tiny_bert();
  no_decoder["decoder"] = nullptr;
  const std::vector<std::pair<json, std::string>> cases = {
      {word_level, "model.type: model 'WordLevel'"},
      {nmt, "normalizer.type: normalizer 'Nmt'"},
      {scripts, "pre_tokenizer.type: pre-tokenizer 'UnicodeScripts'"},
      {byte_level, "decoder.type: decoder 'ByteLevel' with a WordPiece model"},
      {no_decoder, "decoder: no decoder"},
  };
  for (const auto& [j, where] : cases) {
    const test::Failure f = test::failure_of(j);
    EXPECT_EQ(f.code, Errc::unsupported) << f.message;
    EXPECT_NE(f.message.find(where), std::string::npos) << f.message << " should say " << where;
  }
}

TEST(WordPieceErrors, MalformedModelsAreBadFormat) {
  json no_unk = tiny_bert();
  no_unk["model"]["unk_token"] = "<unk>";
  json no_prefix = tiny_bert();
  no_prefix["model"].erase("continuing_subword_prefix");
  json negative = tiny_bert();
  negative["model"]["max_input_chars_per_word"] = -1;
  json bad_cls = tiny_bert();
  bad_cls["post_processor"]["cls"] = "[CLS]";
  const std::vector<std::pair<json, std::string>> cases = {
      {no_unk, "model.unk_token"},
      {no_prefix, "model.continuing_subword_prefix"},
      {negative, "model.max_input_chars_per_word"},
      {bad_cls, "post_processor.cls"},
  };
  for (const auto& [j, where] : cases) {
    const test::Failure f = test::failure_of(j);
    EXPECT_EQ(f.code, Errc::bad_format) << f.message;
    EXPECT_NE(f.message.find(where), std::string::npos) << f.message << " should name " << where;
  }
}

}  // namespace
}  // namespace troupe
