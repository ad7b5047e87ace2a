// Streaming detokenisation: emoji spelled as byte-fallback tokens must never
// come out as broken UTF-8, and the pieces must add up to decode().
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/incremental_decoder.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"
#include "test_vocabs.hpp"

namespace troupe {
namespace {

using Ids = std::vector<int32_t>;
using testing_vocab::id_of;

const std::string kSp = "\xE2\x96\x81";  // ▁
const std::string kFffd = "\xEF\xBF\xBD";

VocabData small_spm() {
  return testing_vocab::spm({{kSp, -5}, {"I", -6}, {"o", -7}, {"k", -8}, {kSp + "I", -1}, {kSp + "o", -2},
                              {kSp + "ok", -3}, {"ok", -4}});
}

// Pushes ids one by one; checks every piece is valid UTF-8; returns them.
std::vector<std::string> stream(IncrementalDecoder& dec, const Ids& ids) {
  std::vector<std::string> pieces;
  for (const int32_t id : ids) {
    pieces.push_back(dec.push(id));
    EXPECT_TRUE(utf8::is_valid(pieces.back())) << "after id " << id;
  }
  pieces.push_back(dec.flush());
  EXPECT_TRUE(utf8::is_valid(pieces.back()));
  return pieces;
}

std::string join(const std::vector<std::string>& pieces) {
  std::string s;
  for (const auto& p : pieces) s += p;
  return s;
}

TEST(IncrementalDecoder, ByteFallbackEmojiComeOutWhole) {
  auto t = Tokenizer::create(small_spm());
  // Heart + variation selector, pizza, a ZWJ family, skin-tone thumbs up:
  // all missing from the vocab, so every byte is its own token.
  const std::string text =
      "I \xE2\x9D\xA4\xEF\xB8\x8F \xF0\x9F\x8D\x95 "
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 "
      "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD ok";
  const Ids ids = t->encode(text, true, false);
  ASSERT_GT(ids.size(), 30u);
  IncrementalDecoder dec(*t);
  const auto pieces = stream(dec, ids);
  EXPECT_EQ(join(pieces), text);
  EXPECT_EQ(join(pieces), t->decode(ids, true));
  // Every emoji is held back until its last byte arrives.
  const std::string pizza = "\xF0\x9F\x8D\x95";
  EXPECT_NE(std::find(pieces.begin(), pieces.end(), pizza), pieces.end());
}

TEST(IncrementalDecoder, HoldsPartialSequences) {
  auto t = Tokenizer::create(small_spm());
  IncrementalDecoder dec(*t);
  EXPECT_EQ(dec.push(3 + 0xF0), "");
  EXPECT_EQ(dec.push(3 + 0x9F), "");
  EXPECT_EQ(dec.push(3 + 0x8D), "");
  EXPECT_EQ(dec.pending_bytes(), 3u);
  EXPECT_EQ(dec.push(3 + 0x95), "\xF0\x9F\x8D\x95");
  EXPECT_EQ(dec.pending_bytes(), 0u);
}

TEST(IncrementalDecoder, InvalidBytesBecomeReplacementCharacters) {
  auto v = small_spm();
  auto t = Tokenizer::create(v);
  IncrementalDecoder dec(*t);
  EXPECT_EQ(dec.push(3 + 0xF0), "");
  EXPECT_EQ(dec.push(3 + 0x9F), "");
  // "ok" cannot continue the sequence: one U+FFFD for the cut-short F0 9F.
  EXPECT_EQ(dec.push(id_of(v, "ok")), kFffd + "ok");
  EXPECT_EQ(dec.push(3 + 0x80), kFffd);  // a stray continuation byte
  EXPECT_EQ(dec.push(3 + 0xE2), "");
  EXPECT_EQ(dec.flush(), kFffd);         // unfinished at the end
  EXPECT_EQ(t->decode(Ids{3 + 0xF0, 3 + 0x9F, id_of(v, "ok"), 3 + 0x80, 3 + 0xE2}, true),
            kFffd + "ok" + kFffd + kFffd);
}

TEST(IncrementalDecoder, LeadingSpaceAndSpecialsLikeDecode) {
  auto v = small_spm();
  auto t = Tokenizer::create(v);
  const int32_t ok = id_of(v, kSp + "ok");
  {
    IncrementalDecoder dec(*t);
    EXPECT_EQ(dec.push(1), "");  // BOS, skipped
    EXPECT_EQ(dec.push(ok), "ok");
    EXPECT_EQ(dec.push(ok), " ok");
    EXPECT_EQ(dec.flush(), "");
    EXPECT_EQ(dec.push(ok), "ok");  // flush starts a new text
  }
  {
    IncrementalDecoder dec(*t, {.skip_special = false});
    EXPECT_EQ(dec.push(1), "<s>");
    EXPECT_EQ(dec.push(ok), " ok");
    EXPECT_EQ(dec.push(2), "</s>");
  }
}

TEST(IncrementalDecoder, RandomIdsMatchDecode) {
  for (const bool spm : {true, false}) {
    auto v = spm ? small_spm() : testing_vocab::bpe({"h e", "\xC4\xA0 t"});
    auto t = Tokenizer::create(v);
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int32_t> any(0, t->n_vocab() - 1);
    for (int trial = 0; trial < 200; ++trial) {
      Ids ids(static_cast<size_t>(1 + trial % 17));
      for (auto& id : ids) id = any(rng);
      for (const bool skip : {true, false}) {
        IncrementalDecoder dec(*t, {.skip_special = skip});
        EXPECT_EQ(join(stream(dec, ids)), t->decode(ids, skip)) << "trial " << trial;
      }
    }
  }
}

}  // namespace
}  // namespace troupe
