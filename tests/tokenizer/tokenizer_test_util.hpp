// Checks shared by the tokenizer tests of tests/tokenizer and tests/model:
// streaming decode as a server streams, the single normalizers and
// pre-tokenizers of a fixture's "components" (tools/fixtures/make_hf_*),
// and how a tokenizer.json is refused.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tokenizer/hf_normalizer.hpp"
#include "tokenizer/hf_pre_tokenizer.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/incremental_decoder.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe::test {

// tests/fixtures/<name> parsed, once per name (the tests run on one thread).
inline const nlohmann::json& fixture_json(const std::string& name) {
  static std::map<std::string, nlohmann::json> parsed;
  auto it = parsed.find(name);
  if (it == parsed.end()) {
    std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/" + name);
    if (!in) throw std::runtime_error("missing fixture tests/fixtures/" + name);
    it = parsed.emplace(name, nlohmann::json::parse(in)).first;
  }
  return it->second;
}

// ids decoded one at a time through IncrementalDecoder; every piece must be
// whole UTF-8.
inline std::string stream_decode(const Tokenizer& t, std::span<const int32_t> ids, bool skip_special) {
  IncrementalDecoder dec(t, {.skip_special = skip_special});
  std::string out;
  for (const int32_t id : ids) {
    const std::string piece = dec.push(id);
    EXPECT_TRUE(utf8::is_valid(piece)) << "broken UTF-8 after id " << id;
    out += piece;
  }
  const std::string rest = dec.flush();
  EXPECT_TRUE(utf8::is_valid(rest));
  return out + rest;
}

// components: {"texts": [...], "normalizers": [{"spec", "out"}], "pre_tokenizers":
// [{"spec", "out"}]}; a normalizer's out of null is the text unchanged.
inline void expect_components(const nlohmann::json& components) {
  const nlohmann::json& texts = components.at("texts");
  for (const nlohmann::json& c : components.at("normalizers")) {
    SCOPED_TRACE(c.at("spec").dump());
    const hf::Normalizer n = hf::Normalizer::from_json(c.at("spec").dump());
    for (size_t i = 0; i < texts.size(); ++i) {
      const nlohmann::json& want = c.at("out").at(i);
      const std::string text = texts[i].get<std::string>();
      EXPECT_EQ(n.apply(text), want.is_null() ? text : want.get<std::string>()) << "text " << i;
    }
  }
  for (const nlohmann::json& c : components.at("pre_tokenizers")) {
    SCOPED_TRACE(c.at("spec").dump());
    const hf::PreTokenizer p = hf::PreTokenizer::from_json(c.at("spec").dump());
    for (size_t i = 0; i < texts.size(); ++i) {
      EXPECT_EQ(p.split(texts[i].get<std::string>(), true), c.at("out").at(i).get<std::vector<std::string>>())
          << "text " << i;
    }
  }
}

// The error a tokenizer.json is refused with; a test failure when accepted.
struct Failure {
  Errc code;
  std::string message;
};

inline Failure failure_of(const nlohmann::json& j) {
  try {
    tokenizer_from_hf_json(j.dump());
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  ADD_FAILURE() << "accepted " << j.dump();
  return {Errc::internal, ""};
}

}  // namespace troupe::test
