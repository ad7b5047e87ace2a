// Tokenizer rules on hand-made vocabs: SPM score order and byte fallback,
// byte-level BPE rank order, special-token matching, BOS, decoding, and the
// errors for vocabs Troupe cannot or will not build. Agreement with Hugging
// Face on real vocabs is tested in tests/model/gguf_tokenizer_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "tokenizer/tokenizer.hpp"
#include "test_vocabs.hpp"

namespace troupe {
namespace {

using Ids = std::vector<int32_t>;
using testing_vocab::id_of;

const std::string kSpace = "\xE2\x96\x81";  // ▁

Errc create_error(VocabData v, std::string* message = nullptr) {
  try {
    Tokenizer::create(std::move(v));
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "create() accepted the vocab";
  return Errc::internal;
}

TEST(SpmTokenizer, HighestScoreMergesFirst) {
  // "ab" outranks "bc": a|b|c -> ab|c. With "bc" ahead: a|bc.
  auto v1 = testing_vocab::spm({{"a", -10}, {"b", -10}, {"c", -10}, {"ab", -1}, {"bc", -2}}, false);
  auto t1 = Tokenizer::create(v1);
  EXPECT_EQ(t1->encode("abc", false, false), (Ids{id_of(v1, "ab"), id_of(v1, "c")}));
  auto v2 = testing_vocab::spm({{"a", -10}, {"b", -10}, {"c", -10}, {"ab", -2}, {"bc", -1}}, false);
  auto t2 = Tokenizer::create(v2);
  EXPECT_EQ(t2->encode("abc", false, false), (Ids{id_of(v2, "a"), id_of(v2, "bc")}));
}

TEST(SpmTokenizer, LeftmostWinsTies) {
  auto v = testing_vocab::spm({{"a", -10}, {"aa", -1}}, false);
  auto t = Tokenizer::create(v);
  EXPECT_EQ(t->encode("aaa", false, false), (Ids{id_of(v, "aa"), id_of(v, "a")}));
}

TEST(SpmTokenizer, SpacePrefixAndByteFallback) {
  auto v = testing_vocab::spm({{kSpace, -5}, {"h", -6}, {"i", -7}, {kSpace + "h", -2}, {kSpace + "hi", -1}});
  auto t = Tokenizer::create(v);
  const int32_t hi = id_of(v, kSpace + "hi");
  EXPECT_EQ(t->encode("hi", false, false), Ids{hi});
  // Hugging Face's Metaspace adds no second "▁" before a leading space.
  EXPECT_EQ(t->encode(" hi", false, false), Ids{hi});
  EXPECT_EQ(t->encode("hi", true, false), (Ids{1, hi}));
  // "é" is not in the vocab: its two UTF-8 bytes as <0xC3> <0xA9>.
  EXPECT_EQ(t->encode("hi\xC3\xA9", false, false), (Ids{hi, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t->decode(Ids{hi, 3 + 0xC3, 3 + 0xA9}, true), "hi\xC3\xA9");
  EXPECT_EQ(t->token_to_bytes(hi), " hi");
  EXPECT_EQ(t->token_to_bytes(3 + '\n'), "\n");
}

TEST(SpmTokenizer, UnknownCharsWithoutByteTokensFuseIntoOneUnk) {
  VocabData v;
  v.model = "llama";
  v.tokens = {"<unk>", "a"};
  v.scores = {0, -1};
  v.token_types = {2, 1};
  v.unk_id = 0;
  auto t = Tokenizer::create(v);
  EXPECT_EQ(t->encode("a\xC3\xA9\xC3\xA9" "a", false, false), (Ids{1, 0, 1}));
}

TEST(SpmTokenizer, SpecialTokensOnlyWhenAsked) {
  auto v = testing_vocab::spm(
      {{kSpace, -5}, {"h", -6}, {"i", -7}, {"hi", -3}, {kSpace + "hi", -1}, {"<", -8}, {">", -9}, {"s", -10}});
  auto t = Tokenizer::create(v);
  const int32_t hi = id_of(v, "hi");
  // A fragment after a special token does not start the text: no "▁".
  EXPECT_EQ(t->encode("<s>hi", false, true), (Ids{1, hi}));
  const Ids literal = t->encode("<s>hi", false, false);
  EXPECT_EQ(literal.front(), id_of(v, kSpace));
  EXPECT_EQ(t->decode(literal, true), "<s>hi");
  // User-defined tokens match even without parse_special.
  EXPECT_EQ(t->encode("hi<|user|>hi", false, false), (Ids{id_of(v, kSpace + "hi"), id_of(v, "<|user|>"), hi}));
}

TEST(SpmTokenizer, DecodeStripsOneLeadingSpaceAndSkipsSpecials) {
  auto v = testing_vocab::spm({{kSpace, -5}, {"h", -6}, {"i", -7}, {kSpace + "hi", -1}});
  auto t = Tokenizer::create(v);
  const int32_t hi = id_of(v, kSpace + "hi");
  const int32_t sp = id_of(v, kSpace);
  EXPECT_EQ(t->decode(Ids{1, hi, hi, 2}, true), "hi hi");
  EXPECT_EQ(t->decode(Ids{1, hi, 2}, false), "<s> hi</s>");
  EXPECT_EQ(t->decode(Ids{sp, sp, hi}, true), "  hi");  // "   hi" less one space
  EXPECT_TRUE(t->strips_leading_space());
}

TEST(BpeTokenizer, MergesByRank) {
  auto v = testing_vocab::bpe({"h e", "\xC4\xA0 t", "\xC4\xA0t he"});  // "Ġ t", "Ġt he"
  auto t = Tokenizer::create(v);
  const int32_t the = id_of(v, "\xC4\xA0the");
  const int32_t he = id_of(v, "he");
  EXPECT_EQ(t->encode(" the", false, false), Ids{the});
  EXPECT_EQ(t->encode("the the", false, false), (Ids{'t', he, the}));
  EXPECT_EQ(t->token_to_bytes(the), " the");
  EXPECT_EQ(t->decode(Ids{'t', he, the}, true), "the the");
  // Bytes that are not printable have stand-ins: "\n" is "Ċ" (id 10 here).
  EXPECT_EQ(t->encode("\n", false, false), Ids{'\n'});
  EXPECT_EQ(t->token_to_bytes('\n'), "\n");
  EXPECT_FALSE(t->strips_leading_space());
}

// gpt-oss's harmony turns: <|end|> closes the reasoning message and the
// answer follows, so only <|return|> and <|call|> end generation there;
// elsewhere (Phi-3) <|end|> ends the turn.
TEST(BpeTokenizer, HarmonyEndsOnReturnAndCallNotEnd) {
  auto with = [](const std::vector<std::string>& controls) {
    VocabData v = testing_vocab::bpe({"h e"});
    for (const std::string& c : controls) {
      v.tokens.push_back(c);
      v.token_types.push_back(static_cast<int32_t>(TokenType::control));
    }
    return v;
  };
  const VocabData harmony = with({"<|end|>", "<|return|>", "<|call|>", "<|channel|>"});
  auto t = Tokenizer::create(harmony);
  EXPECT_FALSE(t->is_eog(id_of(harmony, "<|end|>")));
  EXPECT_TRUE(t->is_eog(id_of(harmony, "<|return|>")));
  EXPECT_TRUE(t->is_eog(id_of(harmony, "<|call|>")));
  EXPECT_FALSE(t->is_eog(id_of(harmony, "<|channel|>")));
  const VocabData phi3 = with({"<|end|>"});
  EXPECT_TRUE(Tokenizer::create(phi3)->is_eog(id_of(phi3, "<|end|>")));
  // The turn's structure stays in decoded text (the chat API reads it);
  // other control tokens still go.
  const Ids turn{id_of(harmony, "<|channel|>"), 'a', id_of(harmony, "<|end|>"), id_of(harmony, "<|return|>")};
  EXPECT_EQ(t->decode(turn, /*skip_special=*/true), "<|channel|>a<|end|>");
  EXPECT_EQ(t->token_to_bytes(id_of(harmony, "<|channel|>")), "<|channel|>");
  EXPECT_EQ(Tokenizer::create(phi3)->decode(Ids{'a', id_of(phi3, "<|end|>")}, true), "a");
}

TEST(BpeTokenizer, LowerRankWinsOverPosition) {
  // "b c" is ranked before "a b": in "abc" the right pair merges first.
  auto v = testing_vocab::bpe({"b c", "a b"});
  auto t = Tokenizer::create(v);
  EXPECT_EQ(t->encode("abc", false, false), (Ids{'a', id_of(v, "bc")}));
}

TEST(BpeTokenizer, ControlTokensAndEndOfGeneration) {
  auto v = testing_vocab::bpe({"h e"});
  auto t = Tokenizer::create(v);
  const int32_t eot = id_of(v, "<|endoftext|>");
  const int32_t im_end = id_of(v, "<|im_end|>");
  EXPECT_EQ(t->encode("he<|im_end|>", false, true), (Ids{id_of(v, "he"), im_end}));
  EXPECT_EQ(t->encode("<|im_end|>", false, false).size(), 10u);  // spelled out byte by byte
  EXPECT_EQ(t->decode(Ids{im_end}, false), "<|im_end|>");
  EXPECT_EQ(t->decode(Ids{im_end}, true), "");
  EXPECT_EQ(t->token_to_bytes(im_end), "");
  EXPECT_EQ(t->token_to_bytes(im_end, true), "<|im_end|>");
  EXPECT_TRUE(t->is_eog(eot));
  EXPECT_TRUE(t->is_eog(im_end));
  EXPECT_FALSE(t->is_eog('a'));
  EXPECT_EQ(t->find_token("<|im_end|>"), im_end);
  EXPECT_EQ(t->find_token("no such token"), -1);
  EXPECT_EQ(t->n_vocab(), static_cast<int32_t>(v.tokens.size()));
  EXPECT_EQ(t->eos(), eot);
}

TEST(Tokenizer, EmptyText) {
  auto v = testing_vocab::spm({{kSpace, -1}});
  auto t = Tokenizer::create(v);
  EXPECT_TRUE(t->encode("", false, true).empty());
  EXPECT_EQ(t->encode("", true, true), Ids{1});
  EXPECT_EQ(t->decode(Ids{}, true), "");
}

TEST(TokenizerErrors, UnsupportedModel) {
  auto v = testing_vocab::bpe({});
  v.model = "rwkv";
  std::string msg;
  EXPECT_EQ(create_error(v, &msg), Errc::unsupported);
  EXPECT_NE(msg.find("tokenizer model 'rwkv' is not supported; supported: llama, gpt2, bert, t5"), std::string::npos)
      << msg;
  // A GGUF Unigram vocabulary needs its unknown token too (tokenizer.json's unk_id).
  v.model = "t5";
  v.unk_id = -1;
  EXPECT_EQ(create_error(v, &msg), Errc::bad_format);
  EXPECT_NE(msg.find("unk_id"), std::string::npos) << msg;
  // A GGUF WordPiece vocabulary needs its unknown token.
  v.model = "bert";
  v.unk_id = -1;
  EXPECT_EQ(create_error(v, &msg), Errc::bad_format);
  EXPECT_NE(msg.find("no unknown_token_id"), std::string::npos) << msg;
}

TEST(TokenizerErrors, UnsupportedPreTokenizer) {
  std::string msg;
  EXPECT_EQ(create_error(testing_vocab::bpe({}, "jais"), &msg), Errc::unsupported);
  EXPECT_NE(msg.find("'jais'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("smollm"), std::string::npos) << msg;
}

TEST(TokenizerErrors, InconsistentVocabs) {
  std::string msg;
  auto short_scores = testing_vocab::spm({{"a", -1}});
  short_scores.scores.pop_back();
  EXPECT_EQ(create_error(short_scores, &msg), Errc::bad_format);
  EXPECT_NE(msg.find("scores"), std::string::npos) << msg;

  auto bad_eos = testing_vocab::spm({{"a", -1}});
  bad_eos.eos_id = 100000;
  EXPECT_EQ(create_error(bad_eos, &msg), Errc::bad_format);
  EXPECT_NE(msg.find("eos_id 100000"), std::string::npos) << msg;

  auto bad_type = testing_vocab::bpe({});
  bad_type.token_types[5] = 9;
  EXPECT_EQ(create_error(bad_type, &msg), Errc::bad_format);

  auto bad_merge = testing_vocab::bpe({"h e"});
  bad_merge.merges.push_back("h zz");
  EXPECT_EQ(create_error(bad_merge, &msg), Errc::bad_format);
  EXPECT_NE(msg.find("merge 1 'h zz'"), std::string::npos) << msg;

  auto no_space = testing_vocab::bpe({"h e"});
  no_space.merges.push_back("he");
  EXPECT_EQ(create_error(no_space, &msg), Errc::bad_format);

  VocabData empty;
  empty.model = "gpt2";
  EXPECT_EQ(create_error(empty, &msg), Errc::bad_format);
}

TEST(TokenizerErrors, BadInputs) {
  auto t = Tokenizer::create(testing_vocab::bpe({}));
  try {
    t->encode("ok\xC3(", false, false);
    ADD_FAILURE() << "expected invalid_argument";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("byte 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(t->token_to_bytes(-1), Error);
  EXPECT_THROW(t->token_to_bytes(t->n_vocab()), Error);
}

}  // namespace
}  // namespace troupe
