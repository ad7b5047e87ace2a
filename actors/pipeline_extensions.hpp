// Plugging one's own CAF actors into a pipeline: a custom sampler (any actor
// implementing sampler_actor) and observers of every request's token stream
// (observer_actor). Needs CAF headers, hence apart from pipeline.hpp.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "actors/interfaces.hpp"
#include "actors/pipeline.hpp"

namespace troupe {

// CAF 0.17 pitfall: `system.spawn(fn)` of a function actor with no extra
// arguments binds a reference to a null pointer inside CAF (UBSan reports
// it); give such a function at least one argument.
struct PipelineExtensions {
  // Replaces the built-in sampler. Called once at start with the pipeline's
  // actor system and model. The actor answers each StepLogits with one
  // SampledToken per row in row order (SampledToken::chosen(...), or status
  // skipped for a request it does not know, failed with an error); SeqOpen precedes a request's first logits, SeqClose
  // follows its end. Keep no handle to it past the Pipeline's lifetime.
  // SeqOpen's params carry the request's logit_bias and output format
  // (response_format): enforcing them is this actor's job, as the built-in
  // sampler does with grammar::TokenGrammar over vocab_trie(tokenizer).
  std::function<sampler_actor(caf::actor_system&, const std::shared_ptr<const Model>&)> make_sampler;
  // Each gets every TokenEvent and FinalEvent of every request, in order per
  // request, besides the request's own sink.
  std::vector<std::function<observer_actor(caf::actor_system&)>> observers;
  // Runs on executor stage `stage`'s thread before each of its forward
  // passes: instrumentation, or fault injection in tests (a stage that
  // sleeps). An exception thrown here fails that step's requests.
  std::function<void(int32_t stage, uint64_t step)> before_stage_step;
};

}  // namespace troupe
