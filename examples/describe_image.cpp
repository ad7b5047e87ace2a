// A vision-language model as a library call: a LLaVA directory answers a
// question about an image file. The image goes in as its encoded bytes
// (PNG or JPEG) beside the turn's content parts, where {"type": "image"}
// marks its place for the chat template, as transformers' processors pass
// images; the pipeline's vision actor decodes it and runs the tower.
//   describe_image MODEL_DIR IMAGE_FILE [QUESTION] [MAX_TOKENS]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "actors/pipeline.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR IMAGE_FILE [QUESTION] [MAX_TOKENS]\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[2], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "describe_image: cannot read %s\n", argv[2]);
    return 2;
  }
  const std::string question = argc > 3 ? argv[3] : "What is in this image?";
  try {
    auto pipeline = troupe::Pipeline::start({.model_path = argv[1]});
    if (pipeline->model_info().image_tokens == 0) {
      std::fprintf(stderr, "describe_image: %s reads text only\n", argv[1]);
      return 1;
    }
    troupe::ChatPrompt chat;
    chat.images.push_back({.bytes = std::string(std::istreambuf_iterator<char>(in), {}), .param = "image"});
    // The image, then the question: the parts the template reads.
    const nlohmann::json parts = {{"content", {{{"type", "image"}}, {{"type", "text"}, {"text", question}}}}};
    chat.messages.push_back({.role = "user", .content = question, .fields_json = parts.dump()});
    troupe::GenerateParams params;
    params.max_new_tokens = argc > 4 ? std::atoi(argv[4]) : 64;
    params.sampling.temperature = 0.0f;
    const troupe::Completion c = pipeline->generate(troupe::EngineRequest::from_chat(chat, params)).get();
    if (c.final.reason == troupe::EndReason::error) {
      std::fprintf(stderr, "describe_image: %s (%s)\n", c.final.error_message.c_str(), c.final.error_param.c_str());
      return 1;
    }
    std::printf("%s\n", c.text.c_str());
    std::printf("[%d prompt tokens, %d of them the image's; %d generated]\n", c.final.prompt_tokens,
                pipeline->model_info().image_tokens, c.final.completion_tokens);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "describe_image: %s\n", e.what());
    return 1;
  }
}
