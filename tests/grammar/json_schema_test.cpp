// JSON schemas compiled to grammars, held to Python's jsonschema: every
// document of tests/fixtures/json_schema_cases.json (made by
// tools/fixtures/make_json_schema_cases.py) is accepted exactly when that
// validator and json.loads accept it. Then the keywords the compiler
// refuses, each by name.
#include "grammar/json_schema.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.hpp"
#include "tests/grammar/grammar_test_util.hpp"

namespace troupe::grammar {
namespace {

using test::accepts;

nlohmann::ordered_json load_cases() {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/json_schema_cases.json");
  EXPECT_TRUE(in.good());
  return nlohmann::ordered_json::parse(in);
}

TEST(JsonSchemaGrammar, AcceptsWhatJsonschemaAccepts) {
  const auto fixture = load_cases();
  size_t checked = 0, valid = 0;
  for (const auto& c : fixture.at("cases")) {
    const auto g = json_schema_grammar(c.at("schema").dump());
    for (const auto& d : c.at("documents")) {
      const std::string text = d.at("text").get<std::string>();
      EXPECT_EQ(accepts(g, text), d.at("valid").get<bool>()) << c.at("name").get<std::string>() << ": " << text;
      ++checked;
      valid += d.at("valid").get<bool>() ? 1 : 0;
    }
  }
  EXPECT_GE(checked, 140u);
  EXPECT_GE(valid, 60u);
}

TEST(JsonSchemaGrammar, PropertiesInSchemaOrderAndNoExtrasByDefault) {
  const auto g = json_schema_grammar(R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}},
                                        "required":["a","b"]})");
  EXPECT_TRUE(accepts(g, R"({"b":1,"a":"x"})"));
  EXPECT_FALSE(accepts(g, R"({"a":"x","b":1})"));
  EXPECT_FALSE(accepts(g, R"({"b":1,"a":"x","c":2})"));
}

TEST(JsonSchemaGrammar, JsonModeIsAnyObject) {
  const auto g = json_object_grammar();
  EXPECT_TRUE(accepts(g, R"({"a":[1,2,{"b":null}],"c":"d\u00e9","e":-1.5e3,"f":true})"));
  EXPECT_TRUE(accepts(g, "{}"));
  EXPECT_TRUE(accepts(g, "\n {\"x\": 1}\n"));
  EXPECT_FALSE(accepts(g, "[]"));
  EXPECT_FALSE(accepts(g, "\"s\""));
  EXPECT_FALSE(accepts(g, "{\"a\":1"));
  EXPECT_FALSE(accepts(g, "{\"a\":1}}"));
  // Whitespace is bounded, so a model cannot pad forever: one line break
  // and an indent of up to 20 a gap.
  EXPECT_TRUE(accepts(g, "{\n" + std::string(20, ' ') + "\"a\": 1\n}"));
  EXPECT_FALSE(accepts(g, "{\n" + std::string(21, ' ') + "\"a\": 1}"));
  EXPECT_FALSE(accepts(g, "{\n\n\"a\": 1}"));
  EXPECT_FALSE(accepts(g, "{  \"a\": 1}"));
}

void expect_refused(const std::string& schema, const std::string& words) {
  test::expect_refused([](const std::string& s) { json_schema_grammar(s); }, schema, words);
}

TEST(JsonSchemaGrammar, RefusesWhatItCannotEnforceByName) {
  expect_refused(R"({"type":"string","pattern":"^a+$"})", "'pattern' is not supported");
  expect_refused(R"({"type":"object","properties":{"x":{"type":"integer","multipleOf":3}}})",
                 "#/properties/x: the keyword 'multipleOf'");
  expect_refused(R"({"type":"array","uniqueItems":true})", "uniqueItems");
  expect_refused(R"({"type":"number","maximum":1.5})", "bounds on a number");
  expect_refused(R"({"type":"integer","minimum":10,"maximum":2})", "no integer lies between");
  expect_refused(R"({"$ref":"#/$defs/missing"})", "does not resolve");
  expect_refused(R"({"$ref":"https://example.com/s.json"})", "only references inside the schema");
  expect_refused(R"({"type":"frog"})", "unknown type 'frog'");
  expect_refused(R"({"allOf":[{"type":"string"},{"maxLength":2}]})", "allOf of one schema");
  expect_refused(R"({"anyOf":[{"type":"string"}],"type":"integer"})", "'type' beside 'anyOf'");
  expect_refused(R"({"type":"string","maxLength":100000})", "above 4096");
  expect_refused("false", "accepts no value");
  expect_refused("{\"type\":", "not valid JSON");
  expect_refused("[1,2]", "an object or a boolean");
}

TEST(JsonSchemaGrammar, DeepAndRecursiveSchemasStayBounded) {
  // 100 nested arrays: refused by the depth limit, not by the C++ stack.
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += R"({"type":"array","items":)";
  deep += "true";
  for (int i = 0; i < 100; ++i) deep += "}";
  expect_refused(deep, "nests deeper than 64");
  // A schema that refers to itself compiles once and matches deep values.
  const auto g = json_schema_grammar(R"({"type":"array","items":{"$ref":"#"}})");
  std::string nested;
  for (int i = 0; i < 500; ++i) nested += "[";
  for (int i = 0; i < 500; ++i) nested += "]";
  EXPECT_TRUE(accepts(g, nested));
  EXPECT_FALSE(accepts(g, "[1]"));
}

}  // namespace
}  // namespace troupe::grammar
