// What a head and a `troupe stage` worker say to each other before the
// first step, and the one place that decides whether they fit: the shared
// secret first, then the protocol version, the model, the layer range, the
// KV geometry and the step limits. Plain functions over JSON text, testable
// without actors or sockets.
#pragma once

#include <cstdint>
#include <string>

namespace troupe {

// Bumped whenever a message between head and worker changes shape.
// 4: logits rows per sequence (speculative decoding, prompt logprobs);
// 5: GenerateParams carries logit_bias and an output format (SeqOpen);
// 6: an output format may be a tool choice (OutputFormat::Kind::tool_calls);
// 7: a step's sequence names its recurrent-state slot (StageSeq::state_slot);
// 8: embedding requests (GenerateParams::embed, a SampledToken's and a
//    FinalEvent's vector).
// 9: a cross-encoder's pair input (StageSeq::type1_from, EmbedParams::type1_from).
// 10: image features in place of token embeddings (StageSeq::embeds).
// 11: image blocks whose tokens see the whole block (StageSeq::open_spans).
inline constexpr uint32_t kStageWireVersion = 11;

// What one side holds (the head: what it expects of the worker).
struct StageFacts {
  std::string model_id;    // model_identity()
  std::string model_name;  // for messages: the file's name
  int64_t first_layer = 0;
  int64_t last_layer = 0;  // exclusive
  int32_t kv_blocks = 0;
  int32_t kv_block_size = 0;
  std::string kv_dtype = "f32";
  int64_t max_tokens = 0;  // most tokens in one step
  int64_t max_seqs = 0;    // most sequences in one step
  // Recurrent-state slots (sequences in flight at once) of a stage with
  // recurrent layers; 0 for one without.
  int64_t state_slots = 0;
  // What a last stage returns: logits, or an embedding model's normed hidden
  // rows (StageOptions::embedding_output). Stages before the last: hidden.
  bool embedding_output = false;
  std::string device;      // the worker's device ("cpu", "cuda:0"); informative
};

// The head's hello: its facts and the secret (empty: none).
std::string hello_json(const StageFacts& head, const std::string& secret);
std::string facts_json(const StageFacts& facts);
// A worker's refusal, {"error": sentence}, and the sentence read back
// ("no reason given" for text that is not one).
std::string refusal_json(const std::string& sentence);
std::string refusal_sentence(const std::string& json);
// Throws Error(bad_format) for text that is not a facts object.
StageFacts parse_facts(const std::string& json);

// The worker's verdict on a hello: empty when accepted, else one sentence
// that names both sides' values. `worker_secret` empty: any secret is fine.
std::string check_hello(uint32_t head_version, const std::string& hello, const StageFacts& worker,
                        const std::string& worker_secret, uint32_t worker_version = kStageWireVersion);

}  // namespace troupe
