// One admitted request on its way through the pipeline: its choices (n, or
// one per prompt of a batch) submitted together, their token and final
// events joined into whole UTF-8 characters, echo and logprobs added,
// metrics and admission accounted, and everything handed to a listener (the
// JSON body, the SSE stream, the WebSocket frames) one call at a time.
//
// The engine's tokenizer actor checks each choice's prompt. Nothing reaches
// the listener until every choice's prompt was accepted, so a request the
// engine refuses (any of its choices) is answered with its error alone and
// an HTTP reply still gets the error's status, not a 200 stream.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/admission.hpp"
#include "net/engine_client.hpp"
#include "net/metrics.hpp"
#include "net/openai_response.hpp"
#include "net/utf8_joiner.hpp"

namespace troupe::net {

struct PreparedChoice {
  EngineRequest request;
  std::string echo;              // text put before the output (completions' echo of a text prompt)
  bool echo_prompt_text = false; // echo the prompt's text as the engine decodes it (a token prompt)
  bool counts_prompt = true;     // usage: each distinct prompt once (not again for its n-1 siblings)
};

struct JobSpec {
  ResponseMeta meta;
  std::string endpoint_label;  // completions, chat, websocket (metrics)
  std::vector<PreparedChoice> choices;
  bool tokens_as_ids = false;  // return_tokens_as_token_ids: logprob tokens as "token_id:N"
  // How a chat output is read (net/chat_answer.hpp).
  struct ToolParsing {
    grammar::ToolCallSyntax syntax = grammar::ToolCallSyntax::json;
    std::vector<std::string> names;
  };
  struct ReasoningParsing {
    bool starts_open = false;  // the output begins inside the block (the template opened it)
  };
  struct AnswerReading {
    // Tools the model may call (tool_choice not "none"): how its calls are
    // found in the output, and the functions they may name.
    std::optional<ToolParsing> tools;
    // A model that thinks in <think> blocks (ModelInfo::reasoning_tags):
    // the block is returned apart, as reasoning_content.
    std::optional<ReasoningParsing> reasoning;
    // gpt-oss (ModelInfo::harmony): the output is harmony messages, read
    // into reasoning, content and calls by net/harmony_answer (tools, if
    // set, gives only the names a call may take).
    bool harmony = false;
  };
  AnswerReading answer;
};

// The job calls these serially (never two at once), from pipeline threads:
// keep them short and non-blocking. on_token / on_choice_end return false
// when the client cannot take more (gone, or too slow): the job then
// cancels every choice.
class JobListener {
 public:
  virtual ~JobListener() = default;
  // text: whole UTF-8 characters, possibly empty (with echo, the first
  // text of a choice starts with the prompt). logprobs: when asked for, the
  // entries this event adds: the token's, after (with echo, on the first
  // event) one per prompt token.
  virtual bool on_token(int32_t choice, const TokenEvent& ev, std::string_view text,
                        const std::vector<TokenLogprobs>* logprobs) = 0;
  // text: what was still held back, released at the end.
  virtual bool on_choice_end(int32_t choice, const FinalEvent& f, std::string_view text) = 0;
  // After every choice ended; the job then drops the listener.
  // prompt_tokens: usage, each distinct prompt once.
  virtual void on_job_end(int32_t prompt_tokens) = 0;
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  // The spec's choices must already be admitted (one admission slot each).
  static std::shared_ptr<GenerationJob> create(EngineClient& backend, Metrics& metrics, AdmissionControl& admission,
                                               JobSpec spec, std::shared_ptr<JobListener> listener);

  // Submits every choice. Call once.
  void start();
  // Cancels every choice still running; safe from any thread, repeatable.
  void cancel();
  // Cancels every choice still running because the server shuts down: their
  // final events (reason cancelled) then carry Errc::unavailable and
  // kShutdownMessage, so that listeners end them as a shutdown, not as a
  // client that left (see ended_by_shutdown).
  void shutdown();
  static constexpr const char* kShutdownMessage = "the server shut down before the request finished";

  const JobSpec& spec() const { return spec_; }

 private:
  GenerationJob(EngineClient& backend, Metrics& metrics, AdmissionControl& admission, JobSpec spec,
                std::shared_ptr<JobListener> listener);

  struct Choice {
    RequestId id = 0;
    bool submitted = false;
    bool accepted = false;  // its PromptEvent came
    bool ended = false;     // its FinalEvent came
    int32_t prompt_tokens = 0;
    Utf8Joiner joiner;
    std::string prefix;       // echo text not yet delivered
    int32_t text_offset = 0;  // bytes of text delivered so far
    int64_t last_token_ns = -1;
    // Events that came before every choice was accepted, delivered then.
    std::vector<TokenEvent> held_tokens;
    std::optional<FinalEvent> held_final;
  };

  void on_prompt(size_t i, const PromptEvent& ev);
  void on_token(size_t i, const TokenEvent& ev);
  void on_final(size_t i, const FinalEvent& f);
  void deliver_token(size_t i, const TokenEvent& ev);
  // Returns the listener when the job is over (to be told outside the lock).
  std::shared_ptr<JobListener> deliver_final(size_t i, const FinalEvent& f);
  std::shared_ptr<JobListener> open_gate_locked();
  std::shared_ptr<JobListener> end_choice_locked(size_t i, const FinalEvent& f, bool gated);
  // A TokenEvent's or a prompt TokenScore's logprobs (both have token,
  // logprob, top_logprobs, bytes, top_bytes).
  template <class Scored>
  TokenLogprobs logprobs_of(const Scored& ev, int32_t offset) const;
  int32_t usage_prompt_tokens() const;  // under the lock, or once every choice ended
  void cancel_locked();

  EngineClient& backend_;
  Metrics& metrics_;
  AdmissionControl& admission_;
  JobSpec spec_;
  std::mutex mutex_;
  std::shared_ptr<JobListener> listener_;
  std::vector<Choice> choices_;
  size_t remaining_ = 0;     // choices whose final the listener has not had
  size_t n_accepted_ = 0;
  bool refused_ = false;     // a choice was refused before all were accepted: held events are dropped
  bool cancelled_ = false;
  bool shutdown_ = false;
};

// A final event of a choice that GenerationJob::shutdown ended.
inline bool ended_by_shutdown(const FinalEvent& f) {
  return f.reason == EndReason::cancelled && f.error_code == Errc::unavailable;
}

}  // namespace troupe::net
