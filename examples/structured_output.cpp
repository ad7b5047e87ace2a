// Structured output from C++: the same request three ways, each held to a
// constraint the sampler enforces token by token: a JSON schema, a GBNF
// grammar, and a fixed list of choices. Prints each output and its end.
//   structured_output MODEL.gguf [PROMPT]
#include <cstdio>
#include <string>

#include "actors/pipeline.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [PROMPT]\n", argv[0]);
    return 2;
  }
  try {
    auto pipeline = troupe::Pipeline::start({.model_path = argv[1]});
    const troupe::TextPrompt prompt{.text = argc > 2 ? argv[2] : "Once upon a time"};
    using Kind = troupe::OutputFormat::Kind;
    const troupe::OutputFormat formats[] = {
        {.kind = Kind::json_schema,
         .schema = R"({"type": "object",
                       "properties": {"hero": {"type": "string", "maxLength": 20},
                                      "age": {"type": "integer", "minimum": 1, "maximum": 99}},
                       "required": ["hero", "age"]})"},
        {.kind = Kind::gbnf, .schema = "root ::= \"The \" (\"cat\" | \"dog\") \" sat on the \" [a-z]+ \".\"\n"},
        {.kind = Kind::choice, .schema = R"(["yes", "no", "maybe"])"},
    };
    int failed = 0;
    for (const troupe::OutputFormat& format : formats) {
      troupe::GenerateParams params{.max_new_tokens = 200, .format = format};
      params.sampling.temperature = 0.0f;
      const troupe::Completion c = pipeline->generate(prompt, params).get();
      std::printf("%s\nfinish: %s\n", c.text.c_str(), troupe::to_string(c.final.reason));
      failed += c.final.reason == troupe::EndReason::error ? 1 : 0;
    }
    return failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "structured_output: %s\n", e.what());
    return 1;
  }
}
