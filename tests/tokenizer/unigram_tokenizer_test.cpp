// XLM-RoBERTa-style tokenizer.json files (Unigram model, Precompiled
// normalizer, Metaspace, TemplateProcessing; a byte_fallback model; T5's
// layout) against what Hugging Face's `tokenizers` computes
// (tests/fixtures/hf_unigram.json, made by
// tools/fixtures/make_unigram_tokenizer_fixtures.py from sentencepiece
// models it trains itself): ids, decoding, streaming, the Precompiled
// normalizer alone. Also hand-made files for the Viterbi rules, and what is
// refused.
#include "tokenizer/unigram_tokenizer.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tests/tokenizer/tokenizer_test_util.hpp"
#include "tokenizer/hf_normalizer.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/incremental_decoder.hpp"
#include "tokenizer/precompiled_charsmap.hpp"

namespace troupe {
namespace {

using Ids = std::vector<int32_t>;
using nlohmann::json;

const json& unigram_fixture() { return test::fixture_json("hf_unigram.json"); }

// Puts the stored-once charsmap back wherever a Precompiled normalizer says "charsmap".
void restore_charsmap(json& n) {
  if (n.is_object()) {
    if (n.value("type", "") == "Precompiled") n["precompiled_charsmap"] = unigram_fixture().at("charsmap");
    for (auto& [key, value] : n.items()) restore_charsmap(value);
  } else if (n.is_array()) {
    for (json& value : n) restore_charsmap(value);
  }
}

// The variant's tokenizer.json with its vocabulary and charsmap put back.
json tokenizer_json(size_t variant) {
  json j = unigram_fixture().at("tokenizers").at(variant).at("tokenizer_json");
  j["model"]["vocab"] = unigram_fixture().at("vocabs").at(j["model"]["vocab"].get<std::string>());
  restore_charsmap(j["normalizer"]);
  return j;
}

class UnigramVariants : public testing::TestWithParam<size_t> {
 protected:
  const json& expected() const { return unigram_fixture().at("tokenizers").at(GetParam()); }
};

TEST_P(UnigramVariants, EncodesLikeHuggingFace) {
  const auto tok = tokenizer_from_hf_json(tokenizer_json(GetParam()).dump());
  const json& corpus = unigram_fixture().at("corpus");
  for (const json& c : expected().at("cases")) {
    const std::string line = corpus.at(c.at("line").get<size_t>()).get<std::string>();
    SCOPED_TRACE("line " + c.at("line").dump() + ": " + line);
    const Ids ids = c.at("ids").get<Ids>();
    EXPECT_EQ(tok->encode(line, true, true), ids);
    EXPECT_EQ(tok->encode(line, false, true), c.at("ids_plain").is_null() ? ids : c.at("ids_plain").get<Ids>());
  }
}

TEST_P(UnigramVariants, DecodesAndStreamsLikeHuggingFace) {
  const auto tok = tokenizer_from_hf_json(tokenizer_json(GetParam()).dump());
  auto check = [&](const json& c) {
    const Ids ids = c.at("ids").get<Ids>();
    EXPECT_EQ(tok->decode(ids, false), c.at("decoded").get<std::string>());
    EXPECT_EQ(tok->decode(ids, true), c.at("decoded_skip").get<std::string>());
    EXPECT_EQ(test::stream_decode(*tok, ids, false), c.at("decoded").get<std::string>());
    EXPECT_EQ(test::stream_decode(*tok, ids, true), c.at("decoded_skip").get<std::string>());
  };
  for (const json& c : expected().at("cases")) {
    SCOPED_TRACE("line " + c.at("line").dump());
    check(c);
  }
  // Specials and unk in the middle, lone "▁" pieces, byte runs cut short.
  for (const json& c : expected().at("decode_cases")) {
    SCOPED_TRACE("decode " + c.at("ids").dump());
    check(c);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixture, UnigramVariants, testing::Range<size_t>(0, 5), [](const auto& p) {
  return unigram_fixture().at("tokenizers").at(p.param).at("name").template get<std::string>();
});

TEST(UnigramFixtureFile, HasAllFiveVariants) { EXPECT_EQ(unigram_fixture().at("tokenizers").size(), 5u); }

// The Precompiled normalizer alone, as normalize_str gives it: graphemes
// under six bytes replaced whole by their shortest key's string, the rest
// character by character.
TEST(PrecompiledNormalizer, MatchesHuggingFace) {
  for (const auto& [map, normalized] :
       {std::pair{"charsmap", "precompiled_normalized"}, std::pair{"small_charsmap", "small_charsmap_normalized"}}) {
    SCOPED_TRACE(map);
    const json spec = {{"type", "Precompiled"}, {"precompiled_charsmap", unigram_fixture().at(map)}};
    const hf::Normalizer n = hf::Normalizer::from_json(spec.dump());
    const json& corpus = unigram_fixture().at("corpus");
    const json& want = unigram_fixture().at(normalized);
    ASSERT_EQ(corpus.size(), want.size());
    for (size_t i = 0; i < corpus.size(); ++i) {
      EXPECT_EQ(n.apply(corpus[i].get<std::string>()), want[i].get<std::string>()) << "line " << i;
    }
  }
}

TEST(PrecompiledNormalizer, Base64AsRustDecodesIt) {
  EXPECT_EQ(hf::decode_base64(""), std::string());
  EXPECT_EQ(hf::decode_base64("TWFu"), std::string("Man"));
  EXPECT_EQ(hf::decode_base64("TWE="), std::string("Ma"));
  EXPECT_EQ(hf::decode_base64("TQ=="), std::string("M"));
  EXPECT_EQ(hf::decode_base64("AAEC/w=="), std::string("\x00\x01\x02\xff", 4));
  for (const char* bad : {"TWF", "TW=u", "TQ=", "T===", "TR==", "TWF=", "TW u", "TWFu\n", "====", "TQ==TWFu"}) {
    EXPECT_FALSE(hf::decode_base64(bad).has_value()) << bad;
  }
}

TEST(PrecompiledNormalizer, HostileTriesMatchNothing) {
  // A trie whose root points far outside the array, and one of no units.
  const std::string far = std::string("\x04\x00\x00\x00", 4) + std::string("\xff\xff\xff\xff", 4) + "x";
  EXPECT_EQ(hf::PrecompiledCharsmap(far, "test").normalize("abc"), "abc");
  EXPECT_EQ(hf::PrecompiledCharsmap(std::string("\0\0\0\0", 4), "test").normalize("abc"), "abc");
}

// --- small hand-written files ---

// Pieces and scores chosen so the best path is not the greedy one.
json tiny_unigram() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [
      {"id": 0, "content": "<s>", "special": true, "normalized": false},
      {"id": 1, "content": "</s>", "special": true, "normalized": false},
      {"id": 2, "content": "<unk>", "special": true, "normalized": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]},
                         "</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}},
    "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": true},
    "model": {"type": "Unigram", "unk_id": 2, "byte_fallback": false,
      "vocab": [["<s>", 0.0], ["</s>", 0.0], ["<unk>", 0.0], ["\u2581", -2.0], ["\u2581ab", -3.0], ["c", -2.5],
                ["\u2581a", -1.0], ["bc", -1.0], ["a", -4.0], ["b", -4.0], ["<0xE2>", -9.0], ["<0x98>", -9.0],
                ["<0x83>", -9.0], ["\u2581abc", -2.5]]}})");
}

TEST(UnigramTokenizer, ViterbiFindsTheBestPath) {
  const auto t = tokenizer_from_hf_json(tiny_unigram().dump());
  // ▁a + bc (-2) beats ▁ab + c (-5.5) and ▁abc (-2.5).
  EXPECT_EQ(t->encode("abc", true, true), (Ids{0, 6, 7, 1}));
  // ▁ab (-3) beats ▁a + b (-5).
  EXPECT_EQ(t->encode("ab", false, true), (Ids{4}));
  EXPECT_EQ(t->encode("", true, true), (Ids{0, 1}));
  EXPECT_EQ(t->decode(Ids{0, 6, 7, 4, 1}, false), "<s> abc ab</s>");
  EXPECT_EQ(t->decode(Ids{0, 6, 7, 4, 1}, true), "abc ab");
}

TEST(UnigramTokenizer, UnknownRunsFuseIntoOneUnk) {
  const auto t = tokenizer_from_hf_json(tiny_unigram().dump());
  // ☃☃ is one unk; x, y too with the ☃ between them; "a" stays a piece.
  EXPECT_EQ(t->encode("a\xE2\x98\x83\xE2\x98\x83"
                      "a",
                      false, true),
            (Ids{6, 2, 8}));
  EXPECT_EQ(t->encode("x\xE2\x98\x83y", false, true), (Ids{3, 2}));
}

TEST(UnigramTokenizer, ByteFallbackSpellsUnknownRunsInBytes) {
  json j = tiny_unigram();
  j["model"]["byte_fallback"] = true;
  const auto t = tokenizer_from_hf_json(j.dump());
  // ☃ (E2 98 83) has all its byte pieces; "x" has none, so the run x☃ is unk.
  EXPECT_EQ(t->encode("a\xE2\x98\x83", false, true), (Ids{6, 10, 11, 12}));
  EXPECT_EQ(t->encode("ax\xE2\x98\x83", false, true), (Ids{6, 2}));
}

TEST(UnigramTokenizer, StreamsLikeDecode) {
  const auto t = tokenizer_from_hf_json(tiny_unigram().dump());
  IncrementalDecoder dec(*t, {.skip_special = true});
  EXPECT_EQ(dec.push(0), "");  // <s> skipped: the next piece still opens the text
  EXPECT_EQ(dec.push(6), "a");
  EXPECT_EQ(dec.push(7), "bc");
  EXPECT_EQ(dec.push(4), " ab");
  EXPECT_EQ(dec.flush(), "");
}

// --- what is refused ---

TEST(UnigramErrors, MalformedFilesNameTheirJsonPath) {
  auto with = [](const char* pointer, const json& value) {
    json j = tiny_unigram();
    j[json::json_pointer(pointer)] = value;
    return j;
  };
  const json precompiled_ok = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAAAA=="}};
  auto charsmap = [&](const std::string& base64) {
    json n = precompiled_ok;
    n["precompiled_charsmap"] = base64;
    return with("/normalizer", json{{"type", "Sequence"}, {"normalizers", {n}}});
  };
  const std::vector<std::pair<json, std::string>> cases = {
      {with("/model/vocab/5/1", "-2.5"), "model.vocab[5][1]: expected a number"},
      {with("/model/vocab/5", json{"c"}), "model.vocab[5]: expected [piece, score]"},
      {with("/model/vocab/5/0", 7), "model.vocab[5][0]: expected a string"},
      {with("/model/vocab", json::object()), "model.vocab: expected an array"},
      {with("/model/unk_id", 14), "model.unk_id: 14 is outside model.vocab (14 pieces)"},
      {with("/model/unk_id", -1), "model.unk_id: -1 is outside"},
      {with("/model/unk_id", "2"), "model.unk_id: expected an integer"},
      {charsmap("AAAA=A=="), "normalizer.normalizers[0].precompiled_charsmap: not valid base64"},
      {charsmap("AAA="), "normalizer.normalizers[0].precompiled_charsmap: charsmap of 2 bytes has no trie size"},
      // Claims a trie of 16 bytes (4 units) and holds one.
      {charsmap("EAAAAAAAAAA="), "normalizer.normalizers[0].precompiled_charsmap: charsmap is truncated"},
      // An empty trie, then a string that is not UTF-8.
      {charsmap("AAAAAP8A"), "precompiled_charsmap: charsmap's normalized strings are not valid UTF-8"},
      {with("/normalizer", json{{"type", "Precompiled"}}), "normalizer.precompiled_charsmap: missing"},
  };
  for (const auto& [j, where] : cases) {
    const test::Failure f = test::failure_of(j);
    EXPECT_EQ(f.code, Errc::bad_format) << f.message;
    EXPECT_NE(f.message.find(where), std::string::npos) << f.message << " should say " << where;
  }
  // The well-formed empty-trie charsmap is accepted and changes nothing.
  EXPECT_EQ(tokenizer_from_hf_json(with("/normalizer", precompiled_ok).dump())->encode("abc", false, true),
            (Ids{6, 7}));
}

TEST(UnigramErrors, UnsupportedConstructsNameTheirJsonPath) {
  json no_unk = tiny_unigram();
  no_unk["model"]["unk_id"] = nullptr;
  json repeated = tiny_unigram();
  repeated["model"]["vocab"][8][0] = "c";
  json bad_regex = tiny_unigram();
  bad_regex["normalizer"] = json::parse(R"({"type": "Replace", "pattern": {"Regex": "(?<=a+)b"}, "content": "x"})");
  const std::vector<std::pair<json, std::string>> cases = {
      {no_unk, "model.unk_id: a Unigram model without an unk_id"},
      {repeated, "model.vocab[8][0]: piece 'c' is also id 5"},
      {bad_regex, "normalizer.pattern"},
  };
  for (const auto& [j, where] : cases) {
    const test::Failure f = test::failure_of(j);
    EXPECT_EQ(f.code, Errc::unsupported) << f.message;
    EXPECT_NE(f.message.find(where), std::string::npos) << f.message << " should say " << where;
  }
}

}  // namespace
}  // namespace troupe
