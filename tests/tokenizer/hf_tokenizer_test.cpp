// Hugging Face tokenizer folders (../shared/tokenizers: Llama 2, Llama 3, Qwen3
// tokenizer.json; GPT-2's encoder.json + vocab.bpe) against what the
// `tokenizers` library computes (tests/fixtures/hf_tokenizers.json, made by
// tools/fixtures/make_hf_tokenizer_fixtures.py): ids on every corpus line with
// and without special tokens, decoding, streaming, repaired invalid UTF-8,
// tokenizer_config.json, tokenizer.json variants and single components. Also
// the errors for files Troupe does not support.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
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

const json& fixture() { return test::fixture_json("hf_tokenizers.json"); }

std::string shared_dir(const std::string& name) { return std::string(TROUPE_SHARED_DIR) + "/tokenizers/" + name; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A decoded text the fixture stores as null equals the line itself.
std::string text_or(const json& value, const std::string& line) {
  return value.is_null() ? line : value.get<std::string>();
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// Each folder is loaded once per process (a tokenizer.json of 10 MB takes a
// moment to read).
const HfTokenizer& loaded(const std::string& name) {
  static std::map<std::string, HfTokenizer> cache;
  auto it = cache.find(name);
  if (it == cache.end()) it = cache.emplace(name, load_hf_tokenizer_files(shared_dir(name))).first;
  return it->second;
}

// tokenizer_config.json as transformers reads it.
void expect_config(const HfTokenizerConfig& c, const Tokenizer& tok, const json& want) {
  auto text = [](const json& v) { return v.is_null() ? std::string() : v.get<std::string>(); };
  auto id = [](const json& v) { return v.is_null() ? -1 : v.get<int32_t>(); };
  EXPECT_EQ(c.bos_token, text(want.at("bos_token")));
  EXPECT_EQ(c.bos_id, id(want.at("bos_id")));
  EXPECT_EQ(c.eos_token, text(want.at("eos_token")));
  EXPECT_EQ(c.eos_id, id(want.at("eos_id")));
  EXPECT_EQ(c.unk_token, text(want.at("unk_token")));
  EXPECT_EQ(c.unk_id, id(want.at("unk_id")));
  EXPECT_EQ(c.pad_token, text(want.at("pad_token")));
  EXPECT_EQ(c.pad_id, id(want.at("pad_id")));
  EXPECT_EQ(c.chat_template, text(want.at("chat_template")));
  // BOS as transformers adds it with add_special_tokens=True.
  EXPECT_EQ(c.add_bos, want.at("adds_bos").get<bool>());
  EXPECT_EQ(tok.vocab().add_bos, want.at("adds_bos").get<bool>());
  if (c.eos_id >= 0) {
    EXPECT_TRUE(tok.is_eog(c.eos_id));
  }
}

class HfTokenizerFiles : public testing::TestWithParam<std::string> {
 protected:
  const Tokenizer& tok() const { return *loaded(GetParam()).tokenizer; }
  const HfTokenizerConfig& config() const { return loaded(GetParam()).config; }
  const json& expected() const { return fixture().at("tokenizers").at(GetParam()); }
};

TEST_P(HfTokenizerFiles, EncodesLikeHuggingFace) {
  expect_config(config(), tok(), expected().at("config"));
  const json& corpus = fixture().at("corpus");
  const json& cases = expected().at("cases");
  ASSERT_EQ(cases.size(), corpus.size());
  EXPECT_EQ(tok().n_vocab(), expected().at("n_vocab").get<int32_t>());
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string line = corpus[i].get<std::string>();
    const json& c = cases[i];
    SCOPED_TRACE("line " + std::to_string(i) + ": " + line);
    EXPECT_EQ(tok().encode(line, true, true), c.at("ids").get<Ids>());
    EXPECT_EQ(tok().encode(line, false, true), c.at("ids_plain").get<Ids>());
    // Special tokens left unmatched in the text (HF's split_special_tokens).
    if (c.contains("ids_split_special")) {
      EXPECT_EQ(tok().encode(line, false, false), c.at("ids_split_special").get<Ids>());
    }
  }

  for (const json& c : expected().at("invalid_utf8")) {
    const std::string raw = from_hex(c.at("bytes_hex").get<std::string>());
    SCOPED_TRACE("invalid UTF-8 " + c.at("bytes_hex").get<std::string>());
    try {
      tok().encode(raw, false, true);
      ADD_FAILURE() << "encode() accepted invalid UTF-8";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
    }
    // Python's errors="replace" and utf8::to_valid both put one U+FFFD per
    // maximal invalid subpart; HF then tokenizes the repaired text.
    EXPECT_EQ(utf8::to_valid(raw), c.at("lossy").get<std::string>());
    EXPECT_EQ(tok().encode(utf8::to_valid(raw), false, true), c.at("ids_plain").get<Ids>());
  }
}

TEST_P(HfTokenizerFiles, DecodesLikeHuggingFace) {
  const json& corpus = fixture().at("corpus");
  const json& cases = expected().at("cases");
  for (size_t i = 0; i < corpus.size(); ++i) {
    const std::string line = corpus[i].get<std::string>();
    const json& c = cases[i];
    SCOPED_TRACE("line " + std::to_string(i) + ": " + line);
    const Ids ids = c.at("ids").get<Ids>();
    EXPECT_EQ(tok().decode(ids, false), c.at("decoded").get<std::string>());
    EXPECT_EQ(tok().decode(ids, true), text_or(c.at("decoded_skip"), line));
    // decode(encode(x)) gives x back exactly where Hugging Face's does.
    const std::string back = tok().decode(c.at("ids_plain").get<Ids>(), false);
    EXPECT_EQ(back, text_or(c.at("decoded_plain"), line));
    EXPECT_EQ(back == line, c.at("round_trip").get<bool>());
    EXPECT_EQ(test::stream_decode(tok(), ids, false), c.at("decoded").get<std::string>());
    EXPECT_EQ(test::stream_decode(tok(), ids, true), text_or(c.at("decoded_skip"), line));
  }
  // Characters cut apart, byte-fallback runs broken by other tokens.
  for (const json& c : expected().at("decode_cases")) {
    const Ids ids = c.at("ids").get<Ids>();
    SCOPED_TRACE("decode " + c.at("ids").dump());
    EXPECT_EQ(tok().decode(ids, false), c.at("decoded").get<std::string>());
    EXPECT_EQ(tok().decode(ids, true), c.at("decoded_skip").get<std::string>());
    EXPECT_EQ(test::stream_decode(tok(), ids, false), c.at("decoded").get<std::string>());
    EXPECT_EQ(test::stream_decode(tok(), ids, true), c.at("decoded_skip").get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Shared, HfTokenizerFiles, testing::Values("llama2", "llama3", "qwen3", "gpt2"),
                         [](const auto& p) { return p.param; });

// --- tokenizer.json with one part swapped ---

json patched(const json& base, const json& patch) {
  json out = base;
  for (const auto& [key, value] : patch.items()) {
    json* target = &out;
    size_t start = 0;
    for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
      target = &(*target)[key.substr(start, dot - start)];
    }
    (*target)[key.substr(start)] = value;
  }
  return out;
}

class HfTokenizerVariants : public testing::TestWithParam<size_t> {};

TEST_P(HfTokenizerVariants, IdsAndDecodingMatch) {
  const json& v = fixture().at("variants").at(GetParam());
  SCOPED_TRACE(v.at("name").get<std::string>());
  const json base = json::parse(read_text(shared_dir(v.at("base").get<std::string>()) + "/tokenizer.json"));
  const auto tok = tokenizer_from_hf_json(patched(base, v.at("patch")).dump());
  const json& corpus = fixture().at("corpus");
  const json& lines = v.at("lines");
  for (size_t k = 0; k < lines.size(); ++k) {
    const std::string line = corpus.at(lines[k].get<size_t>()).get<std::string>();
    const json& c = v.at("cases").at(k);
    SCOPED_TRACE("line " + lines[k].dump() + ": " + line);
    const Ids ids = c.at("ids").get<Ids>();
    EXPECT_EQ(tok->encode(line, true, true), ids);
    EXPECT_EQ(tok->encode(line, false, true), c.at("ids_plain").get<Ids>());
    EXPECT_EQ(tok->decode(ids, false), c.at("decoded").get<std::string>());
    EXPECT_EQ(tok->decode(ids, true), c.at("decoded_skip").get<std::string>());
    EXPECT_EQ(tok->decode(c.at("ids_plain").get<Ids>(), false), c.at("decoded_plain").get<std::string>());
    EXPECT_EQ(test::stream_decode(*tok, ids, false), c.at("decoded").get<std::string>());
    EXPECT_EQ(test::stream_decode(*tok, ids, true), c.at("decoded_skip").get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Fixture, HfTokenizerVariants, testing::Range<size_t>(0, 7),
                         [](const auto& p) {
                           return fixture().at("variants").at(p.param).at("name").template get<std::string>();
                         });

TEST(HfFixtureFile, HasAllSevenVariants) { EXPECT_EQ(fixture().at("variants").size(), 7u); }

// --- single components, as normalize_str / pre_tokenize_str give them ---

TEST(HfComponents, NormalizersAndPreTokenizers) { test::expect_components(fixture().at("components")); }

// --- files Troupe does not take ---

// A small valid tokenizer.json: byte-level BPE over "a", "b", "ab".
json tiny_json() {
  return json::parse(R"({
    "version": "1.0", "truncation": null, "padding": null,
    "added_tokens": [{"id": 3, "content": "<eos>", "special": true, "lstrip": false, "rstrip": false,
                      "normalized": false, "single_word": false}],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "vocab": {"a": 0, "b": 1, "ab": 2},
              "merges": ["a b"]}})");
}

TEST(HfTokenizerErrors, TinyFileWorks) {
  const auto t = tokenizer_from_hf_json(tiny_json().dump());
  EXPECT_EQ(t->encode("abba<eos>", false, true), (Ids{2, 1, 0, 3}));
  EXPECT_EQ(t->decode(Ids{2, 1, 0, 3}, false), "abba<eos>");
  EXPECT_EQ(t->decode(Ids{2, 1, 0, 3}, true), "abba");
}

// XLM-R's <mask> (lstrip): the whitespace before a match is part of it,
// and with rstrip the whitespace after; Unicode's White_Space, as Rust's.
TEST(HfTokenizerAddedTokens, StripTakesTheWhitespaceBeside) {
  json j = tiny_json();
  j["added_tokens"][0]["lstrip"] = true;
  j["added_tokens"][0]["rstrip"] = true;
  const auto t = tokenizer_from_hf_json(j.dump());
  EXPECT_EQ(t->encode("ab \t<eos>\u3000\u00a0 a", false, true), (Ids{2, 3, 0}));
  EXPECT_EQ(t->encode("<eos>  <eos>b", false, true), (Ids{3, 3, 1}));
}

// A cross-encoder's pair: the post-processor's pair template, with the
// position where token type 1 begins.
TEST(HfTokenizerPairs, TemplatesJoinTwoTexts) {
  json bert = tiny_json();
  bert["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"<eos>", 3}}, {"cls", {"b", 1}}};
  const Tokenizer::Pair b = tokenizer_from_hf_json(bert.dump())->encode_pair("ab", "a");
  EXPECT_EQ(b.ids, (Ids{1, 2, 3, 0, 3}));
  EXPECT_EQ(b.type1_from, 3);  // [CLS] A [SEP] B:1 [SEP]:1

  json roberta = bert;
  roberta["post_processor"]["type"] = "RobertaProcessing";
  const Tokenizer::Pair r = tokenizer_from_hf_json(roberta.dump())->encode_pair("ab", "a");
  EXPECT_EQ(r.ids, (Ids{1, 2, 3, 3, 0, 3}));
  EXPECT_EQ(r.type1_from, -1);

  json templ = tiny_json();
  templ["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
      "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<eos>", "type_id": 0}}],
      "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<eos>", "type_id": 0}},
               {"SpecialToken": {"id": "<eos>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
      "special_tokens": {"<eos>": {"id": "<eos>", "ids": [3], "tokens": ["<eos>"]}}})");
  const auto tt = tokenizer_from_hf_json(templ.dump());
  const Tokenizer::Pair p = tt->encode_pair("ab", "b");
  EXPECT_EQ(p.ids, (Ids{2, 3, 3, 1}));
  EXPECT_EQ(p.type1_from, 2);
  EXPECT_EQ(tt->pair_special_count(), 2);
  // Cut to five tokens: the texts keep three, the shorter one of its two.
  EXPECT_EQ(tt->encode_pair("abab", "bbbb", 5).ids, (Ids{2, 3, 3, 1, 1}));
  EXPECT_THROW(tt->encode_pair("a", "b", 2), Error);

  // A pair template Troupe does not follow (B before A; types back to 0)
  // leaves the tokenizer without pairs, and loads.
  for (const char* pair : {R"([{"Sequence": {"id": "B"}}, {"Sequence": {"id": "A"}}])",
                           R"([{"Sequence": {"id": "A"}}, {"Sequence": {"id": "B", "type_id": 1}},
                               {"SpecialToken": {"id": "<eos>", "type_id": 0}}])"}) {
    json odd = templ;
    odd["post_processor"]["pair"] = json::parse(pair);
    const auto t = tokenizer_from_hf_json(odd.dump());
    EXPECT_EQ(t->encode("ab", true, false), (Ids{2, 3}));
    try {
      t->encode_pair("a", "b");
      ADD_FAILURE() << "a pair without a template";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::unsupported);
    }
  }
}

TEST(HfTokenizerErrors, UnsupportedConstructsNameTheirJsonPath) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"model.type", "WordLevel"}}, "model.type"},
      {{{"model.dropout", 0.1}}, "model.dropout"},
      {{{"model.continuing_subword_prefix", "##"}}, "model.continuing_subword_prefix"},
      {{{"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Nmt"}}}}}}},
       "normalizer.normalizers[1].type"},
      {{{"normalizer", {{"type", "Replace"}, {"pattern", {{"Regex", "(?<=a+)b"}}}, {"content", "b"}}}},
       "normalizer.pattern"},
      {{{"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {{{"type", "UnicodeScripts"}}}}}}},
       "pre_tokenizer.pretokenizers[0].type"},
      {{{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(?<=a+)b"}}}, {"behavior", "Isolated"}}}},
       "pre_tokenizer"},
      {{{"decoder", {{"type", "WordPiece"}}}}, "decoder.type"},
      {{{"decoder", nullptr}}, "decoder"},
      {{{"decoder",
         {{"type", "Sequence"}, {"decoders", {{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}}},
       "decoder.decoders[0]"},
      {{{"post_processor",
         {{"type", "TemplateProcessing"}, {"single", {{{"Sequence", {{"id", "A"}}}}, {{"Sequence", {{"id", "B"}}}}}}}}},
       "post_processor.single[1]"},
      {{{"truncation", {{"max_length", 8}}}}, "truncation"},
      {{{"added_tokens", {{{"id", 3}, {"content", "<eos>"}, {"special", true}, {"single_word", true}}}}},
       "added_tokens[0].single_word"},
  };
  for (const auto& [patch, path] : cases) {
    const test::Failure f = test::failure_of(patched(tiny_json(), patch));
    EXPECT_EQ(f.code, Errc::unsupported) << f.message;
    EXPECT_NE(f.message.find(path), std::string::npos) << f.message << " should name " << path;
  }
}

TEST(HfTokenizerErrors, MalformedFilesAreBadFormat) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"model.merges", {"a c"}}}, "model.merges[0]"},
      {{{"model.merges", {"a  b"}}}, "model.merges[0]"},
      {{{"model.vocab", {{"a", 0}, {"b", 0}}}}, "model.vocab"},
      {{{"model.unk_token", "<unk>"}}, "model.unk_token"},
      {{{"added_tokens", {{{"id", 0}, {"content", "<x>"}, {"special", true}}}}}, "added_tokens[0].id"},
      {{{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}}}},
       "pre_tokenizer.behavior"},
      {{{"normalizer", {{"type", "Prepend"}}}}, "normalizer.prepend"},
  };
  for (const auto& [patch, path] : cases) {
    const test::Failure f = test::failure_of(patched(tiny_json(), patch));
    EXPECT_EQ(f.code, Errc::bad_format) << f.message;
    EXPECT_NE(f.message.find(path), std::string::npos) << f.message << " should name " << path;
  }
  try {
    tokenizer_from_hf_json("{\"model\": ");
    ADD_FAILURE() << "accepted truncated JSON";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_format);
  }
}

// Sizes a hostile file may claim: checked before anything is sized by them.
TEST(HfTokenizerLimits, HugeIdsAreRefusedBeforeAllocating) {
  // One id of 2^31 - 2 in a 300-byte file would ask for 2^31 token strings.
  json j = tiny_json();
  j["model"]["vocab"]["ab"] = 2147483646;
  test::Failure f = test::failure_of(j);
  EXPECT_EQ(f.code, Errc::bad_format) << f.message;
  EXPECT_NE(f.message.find("has token id 2147483646, over the limit of 4194304 tokens"), std::string::npos)
      << f.message;
  j = tiny_json();
  j["added_tokens"][0]["id"] = 4000000;  // under the limit, but not contiguous
  f = test::failure_of(j);
  EXPECT_EQ(f.code, Errc::bad_format) << f.message;
  EXPECT_NE(f.message.find("model.vocab: token id 4000000 with only 4 tokens (ids repeat or leave gaps)"),
            std::string::npos)
      << f.message;
}

// nlohmann throws out_of_range (not parse_error) for a number past a double.
TEST(HfTokenizerLimits, NumberPastADoubleIsBadFormat) {
  try {
    tokenizer_from_hf_json(R"({"model": {"type": "BPE", "vocab": {"a": 1e99999}}})");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_format) << e.what();
    EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
  }
}

TEST(HfTokenizerLimits, TooManyMerges) {
  // Written as text: 2^21 + 1 merges, 12 MB.
  std::string text = tiny_json().dump();
  const std::string list = "\"merges\":[\"a b\"]";
  const size_t at = text.find(list);
  ASSERT_NE(at, std::string::npos) << text;
  std::string many = "\"merges\":[\"a b\"";
  many.reserve(6 * (size_t{1} << 21) + 32);
  for (int i = 0; i < (1 << 21); ++i) many += ",\"a b\"";
  many += "]";
  text.replace(at, list.size(), many);
  try {
    tokenizer_from_hf_json(text);
    ADD_FAILURE() << "accepted 2^21 + 1 merges";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_format) << e.what();
    EXPECT_NE(std::string(e.what()).find("2097153 merges, over the limit of 2097152"), std::string::npos) << e.what();
  }
}

// --- tokenizer_config.json and template files in a folder ---

class HfFolder : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(TROUPE_BINARY_DIR) / "hf_tokenizer_test" /
           testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    write("tokenizer.json", tiny_json().dump());
  }
  void write(const std::string& name, const std::string& text) {
    std::filesystem::create_directories((dir_ / name).parent_path());
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  std::filesystem::path dir_;
};

TEST_F(HfFolder, ConfigTokensAsStringsOrAddedTokenObjects) {
  write("tokenizer_config.json", R"({"bos_token": {"__type": "AddedToken", "content": "a"}, "eos_token": "<eos>",
      "add_bos_token": true, "additional_special_tokens": ["<eos>"], "chat_template": "{{ x }}"})");
  const HfTokenizer t = load_hf_tokenizer_files(dir_.string());
  EXPECT_EQ(t.config.bos_token, "a");
  EXPECT_EQ(t.config.bos_id, 0);
  EXPECT_EQ(t.config.eos_id, 3);
  EXPECT_EQ(t.config.add_bos_token, std::optional<bool>(true));
  // As transformers 5 with a tokenizer.json: its post-processor decides.
  EXPECT_FALSE(t.config.add_bos);
  EXPECT_EQ(t.tokenizer->encode("ab", true, true), Ids{2});
  EXPECT_EQ(t.config.additional_special_tokens, std::vector<std::string>{"<eos>"});
  EXPECT_EQ(t.config.chat_template, "{{ x }}");
  EXPECT_TRUE(t.tokenizer->is_eog(3));
}

TEST_F(HfFolder, NamedChatTemplatesAndJinjaFiles) {
  write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "T"},
      {"name": "default", "template": "D"}]})");
  HfTokenizer t = load_hf_tokenizer_files(dir_.string());
  EXPECT_EQ(t.config.chat_template, "D");
  EXPECT_EQ(t.config.chat_templates.at("tool_use"), "T");
  // Template files take precedence over the config's entries.
  write("chat_template.jinja", "J");
  write("additional_chat_templates/rag.jinja", "R");
  t = load_hf_tokenizer_files(dir_.string());
  EXPECT_EQ(t.config.chat_template, "J");
  EXPECT_EQ(t.config.chat_templates.size(), 2u);
  EXPECT_EQ(t.config.chat_templates.at("rag"), "R");
}

TEST_F(HfFolder, TemplateProcessingAddsBosAndEos) {
  json j = tiny_json();
  j["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "a", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "<eos>", "type_id": 0}}],
      "special_tokens": {"a": {"id": "a", "ids": [0], "tokens": ["a"]},
                         "<eos>": {"id": "<eos>", "ids": [3], "tokens": ["<eos>"]}}})");
  write("tokenizer.json", j.dump());
  const HfTokenizer t = load_hf_tokenizer_files(dir_.string());
  EXPECT_TRUE(t.config.add_bos);
  EXPECT_TRUE(t.config.add_eos);
  EXPECT_EQ(t.tokenizer->encode("b", true, true), (Ids{0, 1, 3}));
  EXPECT_EQ(t.tokenizer->encode("b", false, true), Ids{1});
}

TEST_F(HfFolder, MissingFilesAreIoErrors) {
  std::filesystem::remove(dir_ / "tokenizer.json");
  try {
    load_hf_tokenizer(dir_.string());
    ADD_FAILURE() << "loaded an empty folder";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
  }
}

TEST_F(HfFolder, Gpt2FilesUnderTransformersNames) {
  std::filesystem::remove(dir_ / "tokenizer.json");
  // vocab.json + merges.txt: the same format as encoder.json + vocab.bpe.
  write("vocab.json", R"({"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4, "<|endoftext|>": 5})");
  write("merges.txt", "#version: 0.2\na b\n\u0120 ab\n");
  const HfTokenizer t = load_hf_tokenizer_files(dir_.string());
  EXPECT_EQ(t.tokenizer->encode("ab ab<|endoftext|>", false, true), (Ids{2, 4, 5}));
  EXPECT_EQ(t.config.eos_id, 5);
  EXPECT_EQ(t.tokenizer->decode(Ids{2, 4, 5}, true), "ab ab");
}

}  // namespace
}  // namespace troupe
