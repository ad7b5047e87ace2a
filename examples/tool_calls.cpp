// Function calling from C++: the model is asked a question with two tools;
// a named tool_choice holds its output to one call of get_weather in the
// model's own tool-call syntax (Pipeline::model_info() says which), and
// grammar::parse_tool_calls reads the call back. Prints the call and its end.
//   tool_calls MODEL.gguf
#include <cstdio>
#include <string>

#include "actors/pipeline.hpp"
#include "grammar/tool_call_grammar.hpp"
#include "grammar/tool_calls.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
    return 2;
  }
  try {
    auto pipeline = troupe::Pipeline::start({.model_path = argv[1]});
    const std::string tools = R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["c", "f"]}},
        "required": ["city", "unit"]}}},
      {"type": "function", "function": {"name": "get_time"}}])";
    const troupe::grammar::ToolCallSyntax syntax = pipeline->model_info().tool_call_syntax;

    troupe::ChatPrompt chat{.messages = {{.role = "user", .content = "What is the weather in Oslo?"}},
                            .tools_json = tools};
    troupe::GenerateParams params{.max_new_tokens = 200};
    params.sampling.temperature = 0.0f;
    params.format = {.kind = troupe::OutputFormat::Kind::tool_calls,
                     .schema = troupe::grammar::tool_choice_format(syntax, tools, "get_weather", /*parallel=*/false)};
    const troupe::Completion c =
        pipeline->generate(troupe::EngineRequest::from_chat(std::move(chat), std::move(params))).get();

    const troupe::grammar::ToolCallOutput out =
        troupe::grammar::parse_tool_calls(syntax, c.text, {"get_weather", "get_time"});
    for (const troupe::grammar::ToolCall& call : out.calls) {
      std::printf("call: %s(%s)\n", call.name.c_str(), call.arguments.c_str());
    }
    std::printf("syntax: %s\nfinish: %s\n", std::string(troupe::grammar::to_string(syntax)).c_str(),
                troupe::to_string(c.final.reason));
    return out.calls.size() == 1 && c.final.reason == troupe::EndReason::stop ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tool_calls: %s\n", e.what());
    return 1;
  }
}
