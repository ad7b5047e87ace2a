// Pipeline parallelism: the model's layers split over two executor stages,
// each with its own thread, and two micro-batches in flight, so one stage
// computes while the other does. Several prompts stream concurrently; tokens
// are printed as they arrive, tagged with their request.
//   two_stage_pipeline MODEL.gguf [MAX_NEW_TOKENS]
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [MAX_NEW_TOKENS]\n", argv[0]);
    return 2;
  }
  try {
    auto model = troupe::Model::load(argv[1]);
    const int64_t n_layer = model->config().n_layer;
    const int64_t split = n_layer / 2 > 0 ? n_layer / 2 : 1;
    troupe::PipelineConfig config{.model = model};
    if (n_layer >= 2) {
      config.stages = {{.first_layer = 0, .last_layer = split, .threads = 1},
                       {.first_layer = split, .last_layer = n_layer, .threads = 1}};
    }
    auto pipeline = troupe::Pipeline::start(config);
    std::printf("%d stages over %lld layers\n", pipeline->n_stages(), static_cast<long long>(n_layer));

    const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "Tom and Sue went",
                                              "One day, a bird"};
    troupe::GenerateParams params{.max_new_tokens = argc > 2 ? std::atoi(argv[2]) : 48};
    params.sampling.temperature = 0.0f;

    // Callbacks run on actor threads: guard what they share with main.
    std::mutex mutex;
    std::condition_variable done_cv;
    size_t done = 0;
    bool failed = false;
    std::vector<std::string> texts(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      pipeline->submit(
          troupe::TextPrompt{.text = prompts[i]}, params,
          {.on_token =
               [&, i](const troupe::TokenEvent& e) {
                 std::lock_guard lock(mutex);
                 texts[i] += e.text;
                 std::printf("[%zu] token %d '%s'\n", i, e.token, e.text.c_str());
               },
           .on_final =
               [&, i](const troupe::FinalEvent& f) {
                 std::lock_guard lock(mutex);
                 texts[i] += f.tail_text;
                 std::printf("[%zu] finish: %s after %d tokens\n", i, troupe::to_string(f.reason),
                             f.completion_tokens);
                 failed = failed || f.reason == troupe::EndReason::error;
                 ++done;
                 done_cv.notify_all();
               }});
    }
    {
      std::unique_lock lock(mutex);
      done_cv.wait(lock, [&] { return done == prompts.size(); });
    }
    for (size_t i = 0; i < prompts.size(); ++i) std::printf("%s%s\n\n", prompts[i].c_str(), texts[i].c_str());
    const troupe::PipelineStats s = pipeline->stats();
    std::printf("%llu steps, %d KV blocks in use, prefix hit rate %.2f\n", static_cast<unsigned long long>(s.steps),
                s.kv_blocks_used, s.prefix_hit_rate);
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "two_stage_pipeline: %s\n", e.what());
    return 1;
  }
}
