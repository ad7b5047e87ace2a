// A topology described in a file: stages, threads, KV pool and scheduler
// knobs from configs/*.json (format: configs/README.md), the model path from
// the command line when given.
//   topology_from_config CONFIG.json [MODEL.gguf] [MAX_NEW_TOKENS]
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"
#include "actors/pipeline_config.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONFIG.json [MODEL.gguf] [MAX_NEW_TOKENS]\n", argv[0]);
    return 2;
  }
  try {
    troupe::PipelineConfig config = troupe::load_pipeline_config(argv[1]);
    if (argc > 2) config.model_path = argv[2];
    auto pipeline = troupe::Pipeline::start(config);
    std::printf("%s: %d stages\n", argv[1], pipeline->n_stages());

    troupe::GenerateParams params{.max_new_tokens = argc > 3 ? std::atoi(argv[3]) : 32};
    params.sampling.temperature = 0.0f;
    std::vector<std::future<troupe::Completion>> runs;
    for (const char* prompt : {"Once upon a time", "The sun was", "Lily and Ben", "A little fish"}) {
      runs.push_back(pipeline->generate(troupe::TextPrompt{.text = prompt}, params));
    }
    int status = 0;
    for (auto& run : runs) {
      const troupe::Completion c = run.get();
      std::printf("request %lld: %s\nfinish: %s\n", static_cast<long long>(c.final.id), c.text.c_str(),
                  troupe::to_string(c.final.reason));
      if (c.final.reason == troupe::EndReason::error) status = 1;
    }
    const troupe::PipelineStats s = pipeline->stats();
    std::printf("%llu steps, %llu admitted, %llu preemptions\n", static_cast<unsigned long long>(s.steps),
                static_cast<unsigned long long>(s.admitted), static_cast<unsigned long long>(s.preemptions));
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "topology_from_config: %s\n", e.what());
    return 1;
  }
}
