// Every message of the actor pipeline: plain structs with a CAF 0.17
// `inspect`, registered in one type-ID block. Large tensors travel as
// TensorHandle (a shared buffer from the producing stage's pool), never as a
// copy; only a remote send would serialize their contents.
#pragma once

#include <caf/actor.hpp>
#include <caf/deserializer.hpp>
#include <caf/sec.hpp>
#include <caf/serializer.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/type_id.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "actors/request_types.hpp"
#include "actors/tensor_pool.hpp"

namespace troupe {

// Timestamps in messages: steady_clock nanoseconds (plain integers inspect
// everywhere, and steady time never jumps).
inline int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// -- messages, in the order a request meets them ------------------------------

// Pipeline -> tokenizer: a prompt still in text form.
struct PromptRequest {
  RequestId id = 0;
  EngineRequest request;
  int64_t submit_ns = 0;  // steady_clock, when submit() was called
};

// A front end -> tokenizer (/tokenize, /detokenize), answered with a
// TokenizeAnswer: a prompt's ids as a request would have them (text or chat;
// `request.params` unused), or, with `detokenize`, the text of
// request.tokens.
struct TokenizeQuery {
  EngineRequest request;
  bool detokenize = false;
};

// An image of a prompt (a vision-language model's input): n_tokens
// placeholder tokens from `position` whose embeddings are the image's
// features. The tokenizer sets position, n_tokens, bytes and param; the
// vision actor replaces the bytes with the features.
struct PromptImage {
  int32_t position = 0;
  int32_t n_tokens = 0;
  std::string bytes;      // PNG or JPEG as the client sent it, until encoded
  std::string param;      // the request field that held it ("messages[0].content[1]")
  TensorHandle features;  // [n_tokens, n_embd] of the text model
  uint64_t digest = 0;    // of the bytes: keys the image's KV blocks in the prefix cache
  bool open = false;      // its tokens see the whole image (Gemma 3), not only those before them
};

// Tokenizer -> scheduler, once the prompt passed every rule (through the
// vision actor when it has images).
struct TokenRequest {
  RequestId id = 0;
  std::vector<int32_t> prompt;  // [n_tokens]
  GenerateParams params;
  int64_t submit_ns = 0;
  std::vector<PromptImage> images;  // in prompt order, spans disjoint
};

// Tokenizer -> vision actor: a request whose images are still to be encoded,
// with the PromptEvent to send once they are (a refused image ends the
// request with only its RequestDone, as any refused prompt does).
struct VisionRequest {
  PromptEvent event;
  TokenRequest request;
};

// Pipeline -> detokenizer, sent with the request's sink before the request
// enters the pipeline: whatever happens to the request later, the
// detokenizer is the one actor that talks to the sink.
struct RequestOpen {
  RequestId id = 0;
  GenerateParams params;
  int64_t submit_ns = 0;
};

// Scheduler -> sampler and detokenizer, when a request is first scheduled.
struct SeqOpen {
  RequestId id = 0;
  GenerateParams params;
  std::vector<int32_t> prompt;  // the history penalties look at
  int64_t admit_ns = 0;
};

// Scheduler -> sampler: forget a request (finished or cancelled).
struct SeqClose {
  RequestId id = 0;
};

// One sequence of a step, as every executor stage needs it.
// Rows of an image's features that a step's first stage puts in place of
// its tokens' embeddings: new tokens [offset, offset + n_rows) of the step
// take rows [first, first + n_rows) of `rows`.
struct EmbedRows {
  int32_t offset = 0;
  int32_t first = 0;
  int32_t n_rows = 0;
  TensorHandle rows;  // [n_image_tokens, n_embd] the whole image's features, shared in process
};

struct StageSeq {
  RequestId id = 0;
  int32_t n_tokens = 0;              // new tokens this step
  int32_t n_past = 0;                // tokens already in its KV
  std::vector<int32_t> block_table;  // covers n_past + n_tokens positions
  int32_t n_logits = 0;              // logits rows for the last n_logits new tokens (model/batch.hpp)
  int32_t state_slot = -1;           // recurrent-state slot (model/batch.hpp), -1: none
  int32_t type1_from = -1;           // an encoder pair's first token of type 1 (model/batch.hpp), -1: none
  std::vector<EmbedRows> embeds;     // image features in place of token embeddings (first stage)
  std::vector<int32_t> open_spans;   // image blocks seen whole by their tokens (model/batch.hpp; every stage)
};

// Scheduler -> stage 0 -> stage 1 -> ... : one micro-batch.
struct StageBatch {
  uint64_t step = 0;   // the step id within its engine
  int32_t engine = 0;  // the scheduler's virtual engine (micro-batch slot)
  std::vector<StageSeq> seqs;
  std::vector<int32_t> tokens;  // [n_tokens] ids, sequences back to back
  TensorHandle hidden;          // [n_tokens, n_embd] into stages after the first
  int64_t compute_ns = 0;       // forward time of the stages so far (not their queueing)
};

// Last stage -> sampler (sent as the scheduler, so the reply goes there).
struct StepLogits {
  uint64_t step = 0;
  int32_t engine = 0;
  std::vector<RequestId> rows;  // [n_logit_rows] the request of each row
  // [n_logit_rows] the position of the token each row follows, and the
  // token the step fed after it (-1: none; the step ends there). The
  // sampler tells from these which rows sample, verify a proposed token or
  // score a prompt token.
  std::vector<int32_t> positions;
  std::vector<int32_t> next_fed;
  TensorHandle logits;  // [n_logit_rows, n_vocab]
  int64_t compute_ns = 0;       // forward time of every stage
};

// What sampling one logits row gave.
enum class SampleStatus : uint8_t {
  token,     // `token` was chosen
  skipped,   // no token: the sampler does not know the request (it ended while the step ran)
  failed,    // no token: sampling failed for this request (`error_code`, `error`)
  scored,    // a prompt token's logprob (`token` is the prompt's): prompt logprobs
  unused,    // no token: the row of a rejected proposal, or a recomputed position
  embedded,  // an embedding request's last row: `embedding` is its vector, and the request is finished
};

struct SampledToken {
  RequestId id = 0;
  SampleStatus status = SampleStatus::skipped;
  int32_t token = 0;      // with status token
  bool finished = false;  // end of generation (an EOS token)
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  Errc error_code = Errc::internal;  // with status failed
  std::string error;
  std::vector<float> embedding;  // with status embedded

  static SampledToken chosen(RequestId id, int32_t token, bool finished) {
    return {.id = id, .status = SampleStatus::token, .token = token, .finished = finished};
  }
};

// Sampler -> scheduler (the reply to StepLogits), then scheduler ->
// detokenizer: one entry per logits row, in row order.
struct SampledStep {
  uint64_t step = 0;
  int32_t engine = 0;
  std::vector<SampledToken> tokens;
  int64_t compute_ns = 0;  // the step's forward time over all stages (from StepLogits)
};

// Executor -> scheduler: a stage could not run a step.
struct StepFailed {
  uint64_t step = 0;
  int32_t engine = 0;  // -1: no step (a remote stage was lost while idle)
  Errc code = Errc::internal;
  std::string message;
  // The stage lost its KV contents (a remote worker died or stopped
  // answering): every request holding KV fails, and no cached prefix is
  // reused, since the pages on that stage can no longer be trusted.
  bool stage_lost = false;
};

// Scheduler -> executor chain (each stage passes it on): requests that
// ended, so a remote stage's worker forgets them. Sent after their last step.
struct ForgetRequests {
  uint64_t session = 0;  // the remote session it is for (set by the link)
  std::vector<RequestId> ids;
};

// -- remote stages: a head process and `troupe stage` workers ----------------

// Head -> worker before any step. The facts travel as JSON text so that a
// head and a worker of different protocol versions still read each other's
// version (and secret) and refuse with a sentence instead of a silent drop.
struct StageHello {
  uint32_t wire_version = 0;
  std::string json;  // secret, model identity, layers, KV geometry, step limits
};

struct StageWelcome {
  uint32_t wire_version = 0;
  bool accepted = false;
  uint64_t session = 0;  // steps of this session only; a new hello starts another
  std::string json;      // the worker's facts, or {"error": sentence}
  // A worker that holds the last layers samples where its logits are: this
  // session's sampler actor (the head's scheduler uses it as its sampler),
  // so only token ids cross back, not [n_rows, n_vocab] floats. Null when
  // the worker is not the last stage.
  caf::actor sampler;
};

// Head -> worker after the handshake: the scheduler the worker's sampler
// answers (a last stage sends its logits to the sampler as the scheduler).
struct StageScheduler {
  uint64_t session = 0;
  caf::actor scheduler;
};

// Head -> worker: one step, exactly what an in-process stage gets.
struct RemoteStep {
  uint64_t session = 0;
  StageBatch batch;
};

// Worker -> head: the stage's output (hidden states [n_tokens, n_embd], or
// logits [n_logit_rows, n_vocab] from a last stage), or why it failed.
struct StageOutput {
  uint64_t step = 0;
  int32_t engine = 0;
  bool sampled = false;  // the worker's sampler took the logits (out is empty)
  TensorHandle out;
  int64_t compute_ns = 0;
  Errc code = Errc::internal;
  std::string error;  // non-empty: the step failed on the worker
};

struct WorkerStats {
  uint64_t session = 0;
  uint64_t steps = 0;
  int32_t live_sequences = 0;    // requests seen in steps and not forgotten
  int64_t kv_blocks_in_use = 0;  // distinct KV pages their block tables hold
  int64_t kv_blocks_total = 0;
};

// Scheduler or tokenizer -> detokenizer: the request ended there.
struct RequestDone {
  RequestId id = 0;
  EndReason reason = EndReason::stop;
  Errc code = Errc::internal;
  std::string message;
  std::string param;  // the request field at fault, if one is
};

// -- inspectors (CAF 0.17 form) ----------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SamplingParams& x) {
  return f(caf::meta::type_name("SamplingParams"), x.temperature, x.top_k, x.top_p, x.min_p, x.repetition_penalty,
           x.presence_penalty, x.frequency_penalty, x.penalty_last_n, x.seed, x.n_logprobs, x.logprobs, x.logit_bias);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenBias& x) {
  return f(caf::meta::type_name("TokenBias"), x.token, x.bias);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, OutputFormat& x) {
  return f(caf::meta::type_name("OutputFormat"), x.kind, x.schema, x.param);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenLogprob& x) {
  return f(caf::meta::type_name("TokenLogprob"), x.token, x.logprob);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GenerateParams& x) {
  return f(caf::meta::type_name("GenerateParams"), x.max_new_tokens, x.sampling, x.stop, x.priority, x.ignore_eos,
           x.speculative, x.prompt_logprobs, x.format, x.thinking_budget, x.embed);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, EmbedParams& x) {
  return f(caf::meta::type_name("EmbedParams"), x.on, x.pooling, x.normalize, x.dimensions, x.truncate, x.type1_from);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TextPrompt& x) {
  return f(caf::meta::type_name("TextPrompt"), x.text, x.add_special, x.parse_special);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenEvent& x) {
  return f(caf::meta::type_name("TokenEvent"), x.id, x.index, x.token, x.text, x.logprob,
           x.top_logprobs, x.bytes, x.top_bytes, x.prompt_scores);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenScore& x) {
  return f(caf::meta::type_name("TokenScore"), x.token, x.logprob, x.top_logprobs, x.bytes, x.top_bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, FinalEvent& x) {
  return f(caf::meta::type_name("FinalEvent"), x.id, x.reason, x.error_code, x.error_message, x.error_param,
           x.tail_text, x.stop_string, x.prompt_tokens, x.completion_tokens, x.queue_seconds, x.first_token_seconds,
           x.total_seconds, x.embedding);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PipelineStats& x) {
  return f(caf::meta::type_name("PipelineStats"), x.kv_blocks_total, x.kv_blocks_used, x.kv_blocks_cached,
           x.kv_blocks_free, x.kv_blocks_peak, x.running, x.waiting, x.steps_in_flight, x.steps, x.admitted,
           x.preemptions, x.finished, x.cancelled, x.rejected, x.prompt_tokens, x.prefix_hit_tokens, x.prefix_hit_rate,
           x.spec_proposer, x.spec_proposed, x.spec_accepted, x.images_encoded, x.image_cache_hits);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, KvSequenceBlocks& x) {
  return f(caf::meta::type_name("KvSequenceBlocks"), x.id, x.blocks);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, KvSnapshot& x) {
  return f(caf::meta::type_name("KvSnapshot"), x.n_blocks, x.n_used, x.n_cached, x.n_free,
           x.sequences, x.invariant_error);
}

// A tensor handle: shared locally. Only when a message leaves the process
// (a remote stage) is it serialized: its shape, then its floats as one raw
// byte block (no per-element encoding; every host is little-endian x86-64 or
// arm64), read back into a standalone buffer. Other inspectors (to_string)
// see the shape only.
inline constexpr int64_t kMaxWireTensorFloats = int64_t{1} << 30;  // 4 GiB: a corrupt shape is refused, not allocated

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TensorHandle& x) {
  int64_t rows = x ? x->rows : 0;
  int64_t cols = x ? x->cols : 0;
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    if (auto err = f(rows, cols)) return err;
    const size_t bytes = x ? x->size() * sizeof(float) : 0;
    return bytes > 0 ? f.apply_raw(bytes, x->data) : caf::error{};
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    if (auto err = f(rows, cols)) return err;
    if (rows < 0 || cols < 0 || (cols > 0 && rows > kMaxWireTensorFloats / cols)) {
      return caf::make_error(caf::sec::invalid_argument, "tensor shape out of range");
    }
    x = make_tensor(rows, cols);
    const size_t bytes = x->size() * sizeof(float);
    return bytes > 0 ? f.apply_raw(bytes, x->data) : caf::error{};
  } else {
    return f(caf::meta::type_name("Tensor"), rows, cols);
  }
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ChatTurn& x) {
  return f(caf::meta::type_name("ChatTurn"), x.role, x.content, x.has_content, x.fields_json);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ChatPrompt& x) {
  return f(caf::meta::type_name("ChatPrompt"), x.messages, x.tools_json, x.add_generation_prompt,
           x.template_kwargs_json);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, EngineRequest& x) {
  return f(caf::meta::type_name("EngineRequest"), x.kind, x.text, x.pair_text, x.chat, x.tokens, x.params,
           x.fit_max_tokens, x.return_prompt, x.prompt_field);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PromptRequest& x) {
  return f(caf::meta::type_name("PromptRequest"), x.id, x.request, x.submit_ns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PromptEvent& x) {
  return f(caf::meta::type_name("PromptEvent"), x.id, x.n_tokens, x.tokens, x.text);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenizeQuery& x) {
  return f(caf::meta::type_name("TokenizeQuery"), x.request, x.detokenize);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenizeAnswer& x) {
  return f(caf::meta::type_name("TokenizeAnswer"), x.tokens, x.pieces, x.text, x.max_model_len, x.error_code, x.error,
           x.error_param);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PromptImage& x) {
  return f(caf::meta::type_name("PromptImage"), x.position, x.n_tokens, x.bytes, x.param, x.features, x.digest, x.open);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenRequest& x) {
  return f(caf::meta::type_name("TokenRequest"), x.id, x.prompt, x.params, x.submit_ns, x.images);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, VisionRequest& x) {
  return f(caf::meta::type_name("VisionRequest"), x.event, x.request);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, EmbedRows& x) {
  return f(caf::meta::type_name("EmbedRows"), x.offset, x.first, x.n_rows, x.rows);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RequestOpen& x) {
  return f(caf::meta::type_name("RequestOpen"), x.id, x.params, x.submit_ns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SeqOpen& x) {
  return f(caf::meta::type_name("SeqOpen"), x.id, x.params, x.prompt, x.admit_ns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SeqClose& x) {
  return f(caf::meta::type_name("SeqClose"), x.id);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StageSeq& x) {
  return f(caf::meta::type_name("StageSeq"), x.id, x.n_tokens, x.n_past, x.block_table, x.n_logits, x.state_slot,
           x.type1_from, x.embeds, x.open_spans);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StageBatch& x) {
  return f(caf::meta::type_name("StageBatch"), x.step, x.engine, x.seqs, x.tokens, x.hidden,
           x.compute_ns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepLogits& x) {
  return f(caf::meta::type_name("StepLogits"), x.step, x.engine, x.rows, x.positions, x.next_fed,
           x.logits, x.compute_ns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SampledToken& x) {
  return f(caf::meta::type_name("SampledToken"), x.id, x.status, x.token, x.finished, x.logprob, x.top_logprobs,
           x.error_code, x.error, x.embedding);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SampledStep& x) {
  return f(caf::meta::type_name("SampledStep"), x.step, x.engine, x.tokens,
           x.compute_ns);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepFailed& x) {
  return f(caf::meta::type_name("StepFailed"), x.step, x.engine, x.code, x.message, x.stage_lost);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ForgetRequests& x) {
  return f(caf::meta::type_name("ForgetRequests"), x.session, x.ids);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StageHello& x) {
  return f(caf::meta::type_name("StageHello"), x.wire_version, x.json);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StageWelcome& x) {
  return f(caf::meta::type_name("StageWelcome"), x.wire_version, x.accepted, x.session, x.json, x.sampler);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StageScheduler& x) {
  return f(caf::meta::type_name("StageScheduler"), x.session, x.scheduler);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RemoteStep& x) {
  return f(caf::meta::type_name("RemoteStep"), x.session, x.batch);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StageOutput& x) {
  return f(caf::meta::type_name("StageOutput"), x.step, x.engine, x.sampled, x.out, x.compute_ns, x.code, x.error);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WorkerStats& x) {
  return f(caf::meta::type_name("WorkerStats"), x.session, x.steps, x.live_sequences, x.kv_blocks_in_use,
           x.kv_blocks_total);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RequestDone& x) {
  return f(caf::meta::type_name("RequestDone"), x.id, x.reason, x.code, x.message, x.param);
}

}  // namespace troupe

// -- type IDs and atoms --------------------------------------------------------

CAF_BEGIN_TYPE_ID_BLOCK(troupe, caf::first_custom_type_id)

  CAF_ADD_TYPE_ID(troupe, (troupe::PromptRequest))
  CAF_ADD_TYPE_ID(troupe, (troupe::TokenRequest))
  CAF_ADD_TYPE_ID(troupe, (troupe::RequestOpen))
  CAF_ADD_TYPE_ID(troupe, (troupe::SeqOpen))
  CAF_ADD_TYPE_ID(troupe, (troupe::SeqClose))
  CAF_ADD_TYPE_ID(troupe, (troupe::StageBatch))
  CAF_ADD_TYPE_ID(troupe, (troupe::StepLogits))
  CAF_ADD_TYPE_ID(troupe, (troupe::SampledStep))
  CAF_ADD_TYPE_ID(troupe, (troupe::StepFailed))
  CAF_ADD_TYPE_ID(troupe, (troupe::RequestDone))
  CAF_ADD_TYPE_ID(troupe, (troupe::TokenEvent))
  CAF_ADD_TYPE_ID(troupe, (troupe::FinalEvent))
  CAF_ADD_TYPE_ID(troupe, (troupe::PipelineStats))
  CAF_ADD_TYPE_ID(troupe, (troupe::KvSnapshot))
  CAF_ADD_TYPE_ID(troupe, (troupe::ForgetRequests))
  CAF_ADD_TYPE_ID(troupe, (troupe::StageHello))
  CAF_ADD_TYPE_ID(troupe, (troupe::StageWelcome))
  CAF_ADD_TYPE_ID(troupe, (troupe::StageScheduler))
  CAF_ADD_TYPE_ID(troupe, (troupe::RemoteStep))
  CAF_ADD_TYPE_ID(troupe, (troupe::StageOutput))
  CAF_ADD_TYPE_ID(troupe, (troupe::WorkerStats))
  CAF_ADD_TYPE_ID(troupe, (troupe::PromptEvent))
  CAF_ADD_TYPE_ID(troupe, (troupe::TokenizeQuery))
  CAF_ADD_TYPE_ID(troupe, (troupe::TokenizeAnswer))
  CAF_ADD_TYPE_ID(troupe, (troupe::VisionRequest))

  // Scheduler: a delayed_send to itself when batching waits for arrivals.
  CAF_ADD_ATOM(troupe, troupe, wake_atom, "wake")
  // Pipeline -> scheduler: end a request now and free its KV.
  CAF_ADD_ATOM(troupe, troupe, cancel_atom, "cancel")
  // Detokenizer -> scheduler: a stop string ended the request.
  CAF_ADD_ATOM(troupe, troupe, stop_atom, "stop")
  CAF_ADD_ATOM(troupe, troupe, stats_atom, "stats")
  CAF_ADD_ATOM(troupe, troupe, kv_atom, "kv")
  // Pipeline -> scheduler / detokenizer at teardown: end every request.
  CAF_ADD_ATOM(troupe, troupe, shutdown_atom, "shutdown")
  // Remote stage link: try to reach the worker again (after a backoff).
  CAF_ADD_ATOM(troupe, troupe, reconnect_atom, "reconnect")

CAF_END_TYPE_ID_BLOCK(troupe)
