// One admitted request on its way through the pipeline: its choices (n, or
// one per prompt of a batch) submitted together, their token and final
// events joined into whole UTF-8 characters, echo and logprobs added,
// metrics and admission accounted, and everything handed to a listener (the
// JSON body, the SSE stream, the WebSocket frames) one call at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "net/admission.hpp"
#include "net/backend.hpp"
#include "net/metrics.hpp"
#include "net/openai_response.hpp"
#include "net/utf8_joiner.hpp"

namespace troupe::net {

struct PreparedChoice {
  std::vector<int32_t> prompt;  // [n_tokens]
  std::string echo;             // text put before the output (completions' echo)
  GenerateParams params;
};

struct JobSpec {
  ResponseMeta meta;
  std::string endpoint_label;  // completions, chat, websocket (metrics)
  std::vector<PreparedChoice> choices;
  int32_t prompt_tokens = 0;  // usage: each distinct prompt once
};

// The job calls these serially (never two at once), from pipeline threads:
// keep them short and non-blocking. on_token / on_choice_end return false
// when the client cannot take more (gone, or too slow): the job then
// cancels every choice.
class JobListener {
 public:
  virtual ~JobListener() = default;
  // text: whole UTF-8 characters, possibly empty (with echo, the first
  // text of a choice starts with the prompt). logprobs: when asked for.
  virtual bool on_token(int32_t choice, const TokenEvent& ev, std::string_view text, const TokenLogprobs* logprobs) = 0;
  // text: what was still held back, released at the end.
  virtual bool on_choice_end(int32_t choice, const FinalEvent& f, std::string_view text) = 0;
  // After every choice ended; the job then drops the listener.
  virtual void on_job_end() = 0;
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  // The spec's choices must already be admitted (one admission slot each).
  static std::shared_ptr<GenerationJob> create(Backend& backend, Metrics& metrics, AdmissionControl& admission,
                                               JobSpec spec, std::shared_ptr<JobListener> listener);

  // Submits every choice. Call once.
  void start();
  // Cancels every choice still running; safe from any thread, repeatable.
  void cancel();

  const JobSpec& spec() const { return spec_; }

 private:
  GenerationJob(Backend& backend, Metrics& metrics, AdmissionControl& admission, JobSpec spec,
                std::shared_ptr<JobListener> listener);

  struct Choice {
    RequestId id = 0;
    bool submitted = false;
    bool ended = false;
    Utf8Joiner joiner;
    std::string prefix;       // echo text not yet delivered
    int32_t text_offset = 0;  // bytes of text delivered so far
    int64_t last_token_ns = -1;
  };

  void on_token(size_t i, const TokenEvent& ev);
  void on_final(size_t i, const FinalEvent& f);
  TokenLogprobs logprobs_of(const TokenEvent& ev, int32_t offset) const;
  void cancel_locked();

  Backend& backend_;
  Metrics& metrics_;
  AdmissionControl& admission_;
  JobSpec spec_;
  std::mutex mutex_;
  std::shared_ptr<JobListener> listener_;
  std::vector<Choice> choices_;
  size_t remaining_ = 0;
  bool cancelled_ = false;
};

}  // namespace troupe::net
