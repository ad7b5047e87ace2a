// Single-request generation in one loop on one stage: the engine without the
// actor pipeline. The CLI's `generate` uses it, tests use it as the
// "request run alone" reference, and benchmarks use it as the baseline the
// actor pipeline's overhead is measured against.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"
#include "model/sampler.hpp"

namespace troupe {

struct GeneratorOptions {
  int64_t n_ctx = 0;           // context length; 0: the model's trained context, capped at 4096
  int64_t prefill_chunk = 512; // prompt tokens per forward step
  int64_t kv_block_size = 16;
  KvType kv_type = KvType::f32;  // element type of the KV pages (`--kv-type`)
};

struct GenerateRequest {
  int64_t max_new_tokens = 128;
  SamplingParams sampling;
  std::vector<int32_t> stop_tokens;  // end generation after one of these; empty: the vocab's EOS
  // An output constraint (a grammar::TokenGrammar for a JSON schema): only
  // tokens it allows are sampled, and generation ends when it is done.
  // Not owned; it moves with the generation, so one serves one request.
  TokenConstraint* constraint = nullptr;
};

struct GenerateStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// One link of a chain: layers [first_layer, last_layer) on a backend (a
// CPU stage in front of a GPU stage is `troupe generate --gpu-layers`).
struct GeneratorStage {
  Backend* backend = nullptr;
  int64_t first_layer = 0;
  int64_t last_layer = -1;  // -1: the model's last layer
};

class Generator {
 public:
  Generator(std::shared_ptr<const Model> model, Backend& backend, GeneratorOptions options = {});
  // Stages in layer order, covering every layer; hidden states cross each
  // boundary through a host buffer from the device side's host_alloc
  // (pinned on a GPU).
  Generator(std::shared_ptr<const Model> model, std::vector<GeneratorStage> stages, GeneratorOptions options = {});
  ~Generator();
  // The step size and KV pool a Generator's stages get (every stage the
  // same; layer fields unset): what a caller plans devices with.
  static StageOptions stage_limits(const ModelConfig& config, const GeneratorOptions& options);

  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // Prefills the prompt, then samples up to max_new_tokens. on_token is called
  // with each new token; returning false stops generation. Returns the
  // generated ids (without the prompt). Throws Error(invalid_argument) for an
  // empty prompt or one that leaves no room in the context.
  std::vector<int32_t> generate(std::span<const int32_t> prompt, const GenerateRequest& request,
                                const std::function<bool(int32_t)>& on_token = {});

  // Logits of the last prompt token, from a fresh context ([n_vocab]).
  std::vector<float> prompt_logits(std::span<const int32_t> prompt);

  // Teacher forcing from a fresh context: out[i] = log p(tokens[i + 1] |
  // tokens[0..i]) ([tokens.size() - 1]), one decode step per token so every
  // position reads the KV cache as generation does (the KV-type accuracy
  // test and the perplexity bench). Throws Error(invalid_argument) for fewer
  // than 2 tokens or more than the context.
  std::vector<double> token_logprobs(std::span<const int32_t> tokens);

  const GenerateStats& stats() const { return stats_; }
  int64_t n_ctx() const { return n_ctx_; }

 private:
  // Feeds tokens at position n_past; returns logits of the last one when asked.
  void step(std::span<const int32_t> tokens, int32_t n_past, bool want_logits);

  std::shared_ptr<const Model> model_;
  int64_t n_ctx_;
  int64_t chunk_;
  std::vector<int32_t> block_table_;
  struct Link {
    std::unique_ptr<ModelStage> stage;
    Backend* out_memory = nullptr;  // owner of `out` (not the last stage)
    float* out = nullptr;           // [chunk, n_embd] hidden states to the next stage
  };
  std::vector<Link> links_;
  std::vector<float> logits_;
  GenerateStats stats_;
};

}  // namespace troupe
