// The smallest use of the actor pipeline: start the standard topology on a
// model, generate from one prompt, print the text and the final event.
//   minimal_generate MODEL.gguf [PROMPT] [MAX_NEW_TOKENS]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "actors/pipeline.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [PROMPT] [MAX_NEW_TOKENS]\n", argv[0]);
    return 2;
  }
  try {
    auto pipeline = troupe::Pipeline::start({.model_path = argv[1]});
    troupe::GenerateParams params{.max_new_tokens = argc > 3 ? std::atoi(argv[3]) : 64};
    params.sampling.temperature = 0.0f;  // greedy
    const std::string prompt = argc > 2 ? argv[2] : "Once upon a time";

    const troupe::Completion c = pipeline->generate(troupe::TextPrompt{.text = prompt}, params).get();
    std::printf("%s%s\n", prompt.c_str(), c.text.c_str());
    std::printf("finish: %s, %d prompt + %d generated tokens, first token after %.1f ms, %.1f ms in all\n",
                troupe::to_string(c.final.reason), c.final.prompt_tokens, c.final.completion_tokens,
                c.final.first_token_seconds * 1e3, c.final.total_seconds * 1e3);
    return c.final.reason == troupe::EndReason::error ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "minimal_generate: %s\n", e.what());
    return 1;
  }
}
