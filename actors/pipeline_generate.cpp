// Pipeline::generate: submit() with callbacks that collect the request's
// events into a Completion and fulfil a future at its final event.
#include <future>
#include <utility>

#include "actors/pipeline.hpp"

namespace troupe {
namespace {

// Callbacks that fill a Completion, and the future they fulfil at the end.
std::pair<RequestCallbacks, std::future<Completion>> collector() {
  struct Shared {
    std::promise<Completion> promise;
    Completion done;
  };
  auto shared = std::make_shared<Shared>();
  std::future<Completion> future = shared->promise.get_future();
  RequestCallbacks callbacks{.on_token =
                                 [shared](const TokenEvent& e) {
                                   shared->done.text += e.text;
                                   shared->done.tokens.push_back(e);
                                 },
                             .on_final =
                                 [shared](const FinalEvent& f) {
                                   shared->done.text += f.tail_text;
                                   shared->done.final = f;
                                   shared->promise.set_value(std::move(shared->done));
                                 }};
  return {std::move(callbacks), std::move(future)};
}

}  // namespace

std::future<Completion> Pipeline::generate(EngineRequest request) {
  auto [callbacks, future] = collector();
  submit(std::move(request), std::move(callbacks));
  return std::move(future);
}

std::future<Completion> Pipeline::generate(TextPrompt prompt, GenerateParams params) {
  auto [callbacks, future] = collector();
  submit(std::move(prompt), std::move(params), std::move(callbacks));
  return std::move(future);
}

std::future<Completion> Pipeline::generate(std::vector<int32_t> prompt, GenerateParams params) {
  auto [callbacks, future] = collector();
  submit(std::move(prompt), std::move(params), std::move(callbacks));
  return std::move(future);
}

}  // namespace troupe
