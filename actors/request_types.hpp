// What a caller of the actor pipeline sees of one request: its parameters,
// the token events it streams and the one final event that ends it, plus the
// pipeline's counters. Plain structs without CAF, so users (and the HTTP
// layer) include little; actors/messages.hpp makes them CAF messages.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/scheduler_policy.hpp"
#include "core/error.hpp"
#include "grammar/output_format.hpp"
#include "grammar/tool_calls.hpp"
#include "model/pooling.hpp"
#include "model/sampler.hpp"

namespace troupe {

using RequestId = int64_t;

// An embedding request (/v1/embeddings): the prompt's final hidden states
// pooled into one vector that the FinalEvent carries; nothing is generated.
// Only an embedding pipeline (PipelineConfig::embedding) takes one, and
// only such requests.
struct EmbedParams {
  bool on = false;
  Pooling pooling = Pooling::none;  // set at the front door: the pipeline's
  int8_t normalize = -1;            // L2-normalize: 1 yes, 0 no, -1 as the model declares
  int32_t dimensions = 0;           // keep the first N dimensions (Matryoshka models), then normalize; 0: all
  // vLLM's truncate_prompt_tokens: an input longer than this keeps its last
  // this many tokens (a causal model's last token is the one pooled); -1:
  // the context's length; 0: none (a longer input is refused).
  int32_t truncate = 0;
  // Set by the tokenizer actor for a pair input (a cross-encoder's query
  // and document): the position where token type 1 begins; -1: none.
  int32_t type1_from = -1;
};

struct GenerateParams {
  int32_t max_new_tokens = 128;
  // Temperature, filters, penalties, seed; sampling.logprobs / n_logprobs
  // ask for the chosen token's logprob and the n most likely alternatives.
  SamplingParams sampling;
  // Generation ends when the text contains one of these; the stop string
  // itself is not emitted.
  std::vector<std::string> stop;
  Priority priority = Priority::interactive;
  bool ignore_eos = false;  // keep going past end-of-generation tokens
  // Speculative decoding where the pipeline has it on: false keeps this
  // request to one token per step.
  bool speculative = true;
  // The logprob (and sampling.n_logprobs alternatives) of every prompt
  // token after the first, given those before it: the first TokenEvent's
  // prompt_scores. The prompt is then computed in full (no prefix reuse).
  bool prompt_logprobs = false;
  // A constraint on the output (OpenAI's response_format): JSON mode or a
  // JSON schema. The sampler only picks tokens that keep the output a
  // prefix of a document the format accepts, and ends the request when
  // the document is complete.
  OutputFormat format;
  // Tokens the model may spend inside a <think> block before the sampler
  // closes it (Anthropic's thinking.budget_tokens); -1: no budget.
  int32_t thinking_budget = -1;
  EmbedParams embed;
};

// A prompt given as text: rendered chat text or plain text.
struct TextPrompt {
  std::string text;
  bool add_special = true;     // BOS/EOS as the vocab says
  bool parse_special = false;  // match control-token texts (<|im_start|>) as tokens; chat text wants true
};

// A conversation, rendered by the chat template (the one PipelineConfig
// gives, else the model's, else a plain built-in one) in the tokenizer
// actor. JSON travels as text so that messages stay plain data.
struct ChatTurn {
  std::string role;         // system, developer, user, assistant, tool
  std::string content;
  bool has_content = true;  // false: content is None (an assistant turn that only calls tools)
  // More fields the template may read, as a JSON object ({"tool_calls": [...],
  // "name": ..., "tool_call_id": ...}); empty: none.
  std::string fields_json;
};

// An image of a conversation (a vision-language model's input): its encoded
// bytes (PNG or JPEG) and the request field that held it. The turns' content
// parts (ChatTurn::fields_json "content") stand for the images with
// {"type": "image"}, in this order.
struct ChatImage {
  std::string bytes;
  std::string param;  // "messages[0].content[1]"
};

struct ChatPrompt {
  std::vector<ChatTurn> messages;  // at least one
  std::vector<ChatImage> images;   // in the order the turns' parts name them
  std::string tools_json;          // a JSON array of tool schemas; empty: none
  bool add_generation_prompt = true;
  // The last message is an assistant's to go on with (a prefill: vLLM's
  // continue_final_message, Anthropic's and Ollama's trailing assistant
  // turn): the prompt ends where its content ends, without the template's
  // end of turn. Implies add_generation_prompt false.
  bool continue_final_message = false;
  // More template variables (chat_template_kwargs, e.g. {"enable_thinking":
  // false}), a JSON object; empty: none.
  std::string template_kwargs_json;
};

// Everything one request asks of the engine: the prompt (text, chat, or
// token ids) and how to generate. Pipeline::submit takes it; the tokenizer
// actor renders, encodes and checks it against the model (ModelInfo), so
// every front end meets the same rules with the same errors.
struct EngineRequest {
  // pair: a cross-encoder's two texts (text.text and pair_text), joined by
  // the tokenizer's pair template (an embedding request).
  enum class Kind : uint8_t { text, chat, tokens, pair };
  Kind kind = Kind::text;
  TextPrompt text;
  std::string pair_text;
  ChatPrompt chat;
  std::vector<int32_t> tokens;  // [n_tokens]
  GenerateParams params;
  // true: params.max_new_tokens is a ceiling cut to what the context leaves
  // after the prompt (an API's default when the client names none); false:
  // a prompt plus max_new_tokens beyond the context is refused (too_long).
  bool fit_max_tokens = false;
  // The PromptEvent carries the prompt's token ids and their text (echo,
  // token identity in the API).
  bool return_prompt = false;
  // The request field that holds the prompt, named in errors ("prompt[2]");
  // empty: "prompt", or "messages" for chat.
  std::string prompt_field;

  static EngineRequest from_text(TextPrompt prompt, GenerateParams params = {});
  static EngineRequest from_chat(ChatPrompt prompt, GenerateParams params = {});
  static EngineRequest from_tokens(std::vector<int32_t> prompt, GenerateParams params = {});
  static EngineRequest from_pair(std::string first, std::string second, GenerateParams params = {});
};

// The first event of a request the tokenizer accepted (a refused one gets
// only its FinalEvent): how long the prompt is, and, with return_prompt, its
// ids and text.
struct PromptEvent {
  RequestId id = 0;
  int32_t n_tokens = 0;
  std::vector<int32_t> tokens;  // with return_prompt
  std::string text;             // with return_prompt: the prompt's text (special tokens written out)
};

// What the engine publishes of its model, once, for every front end.
struct ModelInfo {
  std::string name;              // from the model file
  int32_t context_length = 0;    // prompt + generated tokens, at most (the scheduler's, capped at the trained one)
  int32_t n_vocab = 0;
  int32_t n_layer = 0;
  int32_t bos = -1;              // -1: none
  int32_t eos = -1;
  std::string bos_text;          // as chat templates see them
  std::string eos_text;
  bool has_chat_template = false;     // the model file carries one
  std::string chat_template_origin;   // which one renders chat: "config", "model" or "builtin"
  grammar::ToolCallSyntax tool_call_syntax = grammar::ToolCallSyntax::json;  // how the model writes tool calls
  // The model thinks in <think>...</think> before it answers (its chat
  // template speaks of them, or the deployment says so); starts_open: the
  // template opens the block itself, so the output begins inside it
  // (DeepSeek-R1, Qwen3 Thinking).
  bool reasoning_tags = false;
  bool reasoning_starts_open = false;
  // The model answers in harmony messages (gpt-oss: its template writes
  // <|channel|> and <|message|>): reasoning, answer and calls are channels.
  bool harmony = false;
  // An embedding pipeline pools (last, mean) what a generating one (none)
  // would sample; its vectors are n_embd wide, normalized as `normalize`.
  Pooling pooling = Pooling::none;
  bool normalize = true;
  int32_t n_embd = 0;
  // An encoder (BERT): it attends both ways, pools its [CLS] or the mean,
  // and is truncated at the end (fit_embed_input).
  bool encoder = false;
  // A sequence classifier (a cross-encoder: a reranker when it has one
  // label): its "embedding" is its head's n_labels logits of a text or a
  // pair; a relevance score is the one logit through a sigmoid
  // (score_sigmoid) or as it is.
  int32_t n_labels = 0;
  bool score_sigmoid = true;
  std::vector<std::string> labels;  // [n_labels] their names (ModelConfig::labels)
  bool multi_label = false;         // a sigmoid per label, not a softmax over them
  // Its token-type table has a second segment (BERT: a pair's second text
  // is type 1; RoBERTa: every token is type 0).
  bool two_segments = false;
  // A causal reranker's prompt for a pair (ModelConfig::rerank_template);
  // empty: the tokenizer's pair template joins the texts.
  std::string rerank_template;
  // A vision-language model (one the engine runs a vision tower for): each
  // image of a chat is image_tokens copies of image_token in the prompt, whose
  // embeddings are the image's features. 0: the model reads text only.
  int32_t image_token = -1;
  int32_t image_tokens = 0;
  // Gemma 3: the token its template writes for an image, which the prompt
  // holds as "\n\n" begin, the image tokens, end "\n\n" (its processor's
  // expansion); -1: the template writes image_token itself.
  int32_t image_begin = -1;
  int32_t image_end = -1;
  bool image_open = false;            // an image's tokens see the whole image (VisionConfig::open_attention)
  int64_t kv_bytes_per_token = 0;     // every stage's KV pages, per token of context
  int32_t kv_block_size = 0;          // tokens per KV page
  int32_t n_kv_blocks = 0;
};

// The tokenizer actor's answer to /tokenize (a prompt's ids, as a request
// with that prompt would have them) and /detokenize (the text of ids).
struct TokenizeAnswer {
  std::vector<int32_t> tokens;
  std::vector<std::string> pieces;   // each token's bytes, special tokens written out
  std::string text;                  // detokenize
  int32_t max_model_len = 0;
  Errc error_code = Errc::internal;  // meaningful when `error` is not empty
  std::string error;
  std::string error_param;
};

// One token with its logprob and alternatives, and their bytes.
struct TokenScore {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;  // n_logprobs alternatives, best first
  std::string bytes;
  std::vector<std::string> top_bytes;  // [top_logprobs.size()]
};

struct TokenEvent {
  RequestId id = 0;
  int32_t index = 0;     // 0 for the first generated token
  int32_t token = 0;
  std::string text;      // whole UTF-8 characters; may be empty (held back, or a special token)
  float logprob = 0.0f;  // when the request asked for logprobs
  std::vector<TokenLogprob> top_logprobs;  // n_logprobs alternatives, best first
  // With logprobs: this token's own bytes (a part of a UTF-8 character, or a
  // special token's text) and each alternative's, so that no front end
  // needs the tokenizer.
  std::string bytes;
  std::vector<std::string> top_bytes;  // [top_logprobs.size()]
  // With params.prompt_logprobs, on the first event only: every prompt
  // token ([n_prompt]), each scored given those before it; the first has
  // nothing before it (logprob NaN, no alternatives).
  std::vector<TokenScore> prompt_scores;
};

enum class EndReason : uint8_t { stop, length, cancelled, error };

const char* to_string(EndReason r);

struct FinalEvent {
  RequestId id = 0;
  EndReason reason = EndReason::stop;
  Errc error_code = Errc::internal;  // meaningful when reason == error
  std::string error_message;
  std::string error_param;  // the request field at fault, if one is ("prompt", "max_tokens", "top_p")
  // Text still held back when the request ended: the end of a possible stop
  // string that did not complete, or an unfinished UTF-8 character (as
  // U+FFFD). The token texts followed by this are the whole output.
  std::string tail_text;
  std::string stop_string;  // the stop string that ended it, if any
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  double queue_seconds = 0;  // submit -> first scheduled (or -> end when never scheduled)
  double first_token_seconds = 0;  // submit -> first token event (0 without one)
  double total_seconds = 0;  // submit -> this event
  std::vector<float> embedding;  // an embedding request's vector (reason stop)
};

struct PipelineStats {
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;    // held by sequences
  int32_t kv_blocks_cached = 0;  // free but holding a reusable prefix
  int32_t kv_blocks_free = 0;
  int32_t kv_blocks_peak = 0;    // most ever held by sequences at once
  int32_t running = 0;  // sequences holding KV
  int32_t waiting = 0;  // queued, not yet admitted (or preempted)
  int32_t steps_in_flight = 0;
  uint64_t steps = 0;
  uint64_t admitted = 0;
  uint64_t preemptions = 0;
  uint64_t finished = 0;
  uint64_t cancelled = 0;
  uint64_t rejected = 0;
  uint64_t prompt_tokens = 0;      // prefilled at admission
  uint64_t prefix_hit_tokens = 0;  // of those, found in the prefix cache
  double prefix_hit_rate = 0;
  // Speculative decoding: its proposer ("ngram", "draft", "self"; empty:
  // off), the tokens it proposed and, of those, the target model accepted.
  std::string spec_proposer;
  uint64_t spec_proposed = 0;
  uint64_t spec_accepted = 0;
  // A vision-language model's images: run through the vision tower, and
  // found in the vision actor's cache of recent images' features instead.
  uint64_t images_encoded = 0;
  uint64_t image_cache_hits = 0;
};

// One actor's load (Pipeline::actor_loads): messages in its mailbox now,
// and the messages it has handled and the time that took, since it started.
struct ActorLoad {
  std::string actor;  // scheduler, detokenizer, executor_0, executor_1, ...
  int64_t mailbox_depth = 0;
  uint64_t messages = 0;
  double busy_seconds = 0;
};

// One sequence's KV block table, for checks and debugging.
struct KvSequenceBlocks {
  RequestId id = 0;
  std::vector<int32_t> blocks;
};

struct KvSnapshot {
  int32_t n_blocks = 0;
  int32_t n_used = 0;
  int32_t n_cached = 0;
  int32_t n_free = 0;
  std::vector<KvSequenceBlocks> sequences;  // by request id
  // Empty when the scheduler's KV and queue invariants held at the snapshot
  // (EngineSet::check_invariants), else what broke.
  std::string invariant_error;
};

}  // namespace troupe
