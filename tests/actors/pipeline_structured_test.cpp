// Structured output through the actor pipeline: a JSON schema makes even a
// story model write a document the schema accepts (every string, array and
// integer bounded, so the document ends within the token budget),
// greedy or sampled, with speculative decoding on or off; logit_bias moves
// the choice; a bad schema or bias is refused at the front door naming the
// field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pipeline_test_util.hpp"

namespace troupe {
namespace {

using test::greedy;

const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 12},
    "age": {"type": "integer", "minimum": 1, "maximum": 99},
    "pets": {"type": "array", "items": {"enum": ["cat", "dog", "fish"]}, "maxItems": 3},
    "happy": {"type": "boolean"}
  },
  "required": ["name", "age", "pets", "happy"],
  "additionalProperties": false
})";

// The output parsed, with the person schema's rules checked one by one.
void expect_person(const Completion& c) {
  ASSERT_EQ(c.final.reason, EndReason::stop) << c.final.error_message << "\n" << c.text;
  nlohmann::ordered_json doc;
  ASSERT_NO_THROW(doc = nlohmann::ordered_json::parse(c.text)) << c.text;
  ASSERT_TRUE(doc.is_object()) << c.text;
  ASSERT_EQ(doc.size(), 4u) << c.text;
  ASSERT_TRUE(doc.at("name").is_string());
  const size_t n = doc.at("name").get<std::string>().size();
  EXPECT_TRUE(n >= 1 && n <= 12 * 4) << c.text;
  ASSERT_TRUE(doc.at("age").is_number_integer()) << c.text;
  EXPECT_GE(doc.at("age").get<int>(), 1);
  EXPECT_LE(doc.at("age").get<int>(), 99);
  ASSERT_TRUE(doc.at("pets").is_array());
  EXPECT_LE(doc.at("pets").size(), 3u);
  for (const auto& p : doc.at("pets")) {
    const std::string s = p.get<std::string>();
    EXPECT_TRUE(s == "cat" || s == "dog" || s == "fish") << s;
  }
  EXPECT_TRUE(doc.at("happy").is_boolean());
}

GenerateParams with_schema(GenerateParams p, const char* schema) {
  p.format = OutputFormat{.kind = OutputFormat::Kind::json_schema, .schema = schema};
  return p;
}

TEST(PipelineStructured, SchemaHoldsGreedyAndSampled) {
  auto p = Pipeline::start(test::stories_config(test::split(2)));
  const TextPrompt prompt{.text = "Once upon a time, a girl"};
  auto g = p->generate(prompt, with_schema(greedy(1000), kPersonSchema));
  std::vector<std::future<Completion>> sampled;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    GenerateParams s{.max_new_tokens = 1000};
    s.sampling.temperature = 1.0f;
    s.sampling.top_p = 0.95f;
    s.sampling.seed = seed;
    sampled.push_back(p->generate(prompt, with_schema(s, kPersonSchema)));
  }
  // An unconstrained request beside them is untouched by their grammars.
  const std::vector<int32_t> plain = test::stories_tokenizer().encode("Once upon a time", true, false);
  auto free_run = p->generate(plain, greedy(24));
  expect_person(test::wait_for(g, std::chrono::seconds(60)));
  for (auto& f : sampled) expect_person(test::wait_for(f, std::chrono::seconds(60)));
  EXPECT_EQ(test::ids_of(test::wait_for(free_run)), test::reference(plain, 24));
}

TEST(PipelineStructured, SpeculativeDecodingKeepsTheSchema) {
  // Prompt lookup proposes tokens copied from the prompt, which here holds
  // a document of the schema's shape: the grammar checks each proposal
  // row by row and the output still holds.
  PipelineConfig c = test::stories_config(test::split(1));
  c.scheduler.spec_max_draft = 4;
  auto p = Pipeline::start(std::move(c));
  const TextPrompt prompt{
      .text = R"({"name": "Lily", "age": 5, "pets": ["cat"], "happy": true} The cat and the dog. The cat)"};
  auto greedy_run = p->generate(prompt, with_schema(greedy(1000), kPersonSchema));
  GenerateParams s{.max_new_tokens = 1000};
  s.sampling.temperature = 0.7f;
  s.sampling.seed = 11;
  auto sampled = p->generate(prompt, with_schema(s, kPersonSchema));
  expect_person(test::wait_for(greedy_run, std::chrono::seconds(60)));
  expect_person(test::wait_for(sampled, std::chrono::seconds(60)));
}

TEST(PipelineStructured, GbnfGrammarsAndChoices) {
  auto p = Pipeline::start(test::stories_config(test::split(2)));
  const TextPrompt prompt{.text = "Once upon a time"};
  GenerateParams g = greedy(200);
  g.format = OutputFormat{.kind = OutputFormat::Kind::gbnf,
                          .schema = "root ::= \"Moves: \" move (\", \" move){2}\nmove ::= [a-h] [1-8]\n",
                          .param = "grammar"};
  GenerateParams c{.max_new_tokens = 50};
  c.sampling.temperature = 1.0f;
  c.sampling.seed = 4;
  c.format = OutputFormat{.kind = OutputFormat::Kind::choice, .schema = R"(["Lily", "Tom", "the big dog"])"};
  GenerateParams bad = greedy(8);
  bad.format = OutputFormat{.kind = OutputFormat::Kind::gbnf, .schema = "root ::= item\n", .param = "grammar"};
  auto moves = p->generate(prompt, g);
  auto pick = p->generate(prompt, c);
  auto refused = p->generate(prompt, bad);
  const Completion m = test::wait_for(moves);
  ASSERT_EQ(m.final.reason, EndReason::stop) << m.text;
  ASSERT_EQ(m.text.size(), std::string("Moves: a1, b2, c3").size()) << m.text;
  EXPECT_EQ(m.text.substr(0, 7), "Moves: ");
  for (size_t i : {7u, 11u, 15u}) {
    EXPECT_TRUE(m.text[i] >= 'a' && m.text[i] <= 'h') << m.text;
    EXPECT_TRUE(m.text[i + 1] >= '1' && m.text[i + 1] <= '8') << m.text;
  }
  const Completion k = test::wait_for(pick);
  EXPECT_EQ(k.final.reason, EndReason::stop);
  EXPECT_TRUE(k.text == "Lily" || k.text == "Tom" || k.text == "the big dog") << k.text;
  const Completion r = test::wait_for(refused);
  EXPECT_EQ(r.final.error_param, "grammar");
  EXPECT_NE(r.final.error_message.find("rule 'item' is used but never defined"), std::string::npos)
      << r.final.error_message;
}

TEST(PipelineStructured, LogitBiasMovesTheChoice) {
  auto p = Pipeline::start(test::stories_config(test::split(1)));
  const std::vector<int32_t> prompt = test::stories_tokenizer().encode("Once upon a time", true, false);
  const std::vector<int32_t> free_ids = test::reference(prompt, 4);
  ASSERT_FALSE(free_ids.empty());
  // +100 on a token the model would not pick makes it the first choice;
  // -100 on its first choice makes it something else.
  const int32_t forced = free_ids[0] == 300 ? 301 : 300;
  GenerateParams up = greedy(1);
  up.sampling.logit_bias = {{.token = forced, .bias = 100.0f}};
  GenerateParams down = greedy(1);
  down.sampling.logit_bias = {{.token = free_ids[0], .bias = -100.0f}};
  auto a = p->generate(prompt, up);
  auto b = p->generate(prompt, down);
  EXPECT_EQ(test::ids_of(test::wait_for(a)), std::vector<int32_t>{forced});
  const std::vector<int32_t> other = test::ids_of(test::wait_for(b));
  ASSERT_EQ(other.size(), 1u);
  EXPECT_NE(other[0], free_ids[0]);
}

TEST(PipelineStructured, BadSchemasAndBiasesAreRefusedByField) {
  auto p = Pipeline::start(test::stories_config(test::split(1)));
  const std::vector<int32_t> prompt = test::stories_tokenizer().encode("Once", true, false);
  auto bad_schema = p->generate(prompt, with_schema(greedy(8), R"({"type":"string","pattern":"a+"})"));
  auto not_json = p->generate(prompt, with_schema(greedy(8), "{"));
  GenerateParams bias = greedy(8);
  bias.sampling.logit_bias = {{.token = 512, .bias = 1.0f}};  // n_vocab is 512
  auto bad_bias = p->generate(prompt, bias);
  GenerateParams range = greedy(8);
  range.sampling.logit_bias = {{.token = 5, .bias = 101.0f}};
  auto bad_range = p->generate(prompt, range);
  auto ok = p->generate(prompt, greedy(8));
  for (auto* f : {&bad_schema, &not_json}) {
    const Completion c = test::wait_for(*f);
    EXPECT_EQ(c.final.reason, EndReason::error);
    EXPECT_EQ(c.final.error_param, "response_format") << c.final.error_message;
    EXPECT_TRUE(c.tokens.empty());
  }
  const Completion b = test::wait_for(bad_bias);
  EXPECT_EQ(b.final.error_param, "logit_bias");
  EXPECT_NE(b.final.error_message.find("outside the vocabulary"), std::string::npos) << b.final.error_message;
  EXPECT_EQ(test::wait_for(bad_range).final.error_param, "logit_bias");
  EXPECT_EQ(test::ids_of(test::wait_for(ok)), test::reference(prompt, 8));
}

}  // namespace
}  // namespace troupe
