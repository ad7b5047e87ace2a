// JobListener implementations for HTTP. The SSE reply sends its headers
// with the first event, so a request the engine refuses before producing
// anything still gets a proper status code instead of a 200 stream that
// carries an error.
#include "net/http_replies.hpp"

#include "net/answer_stream.hpp"
#include "net/api_error.hpp"
#include "net/chat_answer.hpp"
#include "net/job_reply.hpp"
#include "net/routes.hpp"

namespace troupe::net {
namespace {

const char* finish_reason(EndReason r) { return r == EndReason::length ? "length" : "stop"; }

class GenerationReply : public JobReply {
 public:
  GenerationReply(ServerCore& core, JobSpec spec, bool stream, bool include_usage)
      : JobReply(core, std::move(spec)), stream_(stream), include_usage_(include_usage) {
    const size_t n = spec_.choices.size();
    outputs_.resize(n);
    role_sent_.assign(n, false);
    for (size_t i = 0; i < n; ++i) {
      outputs_[i].index = static_cast<int32_t>(i);
      const SamplingParams& s = spec_.choices[i].request.params.sampling;
      outputs_[i].with_logprobs = s.logprobs || s.n_logprobs > 0;
      answers_.emplace_back(spec_.answer);
    }
  }

  bool on_token(int32_t choice, const TokenEvent&, std::string_view text,
                const std::vector<TokenLogprobs>* lps) override {
    ChoiceOutput& out = outputs_[static_cast<size_t>(choice)];
    if (!stream_) {
      out.text += text;
      if (lps != nullptr) out.logprobs.insert(out.logprobs.end(), lps->begin(), lps->end());
      return true;
    }
    if (failed_) return false;
    if (plain_text()) {
      if (text.empty() && lps == nullptr) return true;
      return send_event(ChunkInput{.index = choice, .text = text, .with_logprobs = lps != nullptr, .logprobs = lps});
    }
    // A <think> block goes out as reasoning_content; text that may be a
    // call waits for the end of the output.
    ReasoningParts parts = answers_[static_cast<size_t>(choice)].push(text);
    if (parts.content.empty() && parts.reasoning.empty() && lps == nullptr) return true;
    return send_event(ChunkInput{.index = choice,
                                 .text = parts.content,
                                 .reasoning = parts.reasoning,
                                 .with_logprobs = lps != nullptr,
                                 .logprobs = lps});
  }

  bool on_choice_end(int32_t choice, const FinalEvent& f, std::string_view text) override {
    ChoiceOutput& out = outputs_[static_cast<size_t>(choice)];
    completion_tokens_ += f.completion_tokens;
    if (f.reason == EndReason::error || f.reason == EndReason::cancelled) {
      const bool shutdown = ended_by_shutdown(f);
      if (!error_) error_ = job_end_error(f);
      if (!stream_ || failed_) return false;
      if (!head_sent_) {
        // Nothing sent yet (the job holds every event until all choices'
        // prompts are accepted): a proper status code is still possible.
        failed_ = true;
        writer_->send(core_.error_reply(*error_));
        return false;
      }
      if (shutdown) {
        // The server stops: the choice's last chunk with its finish_reason,
        // then (once) the error event; on_job_end adds [DONE].
        if (!send_event(ChunkInput{.index = choice, .text = text, .finish_reason = "cancelled"})) return false;
        if (shutdown_sent_) return true;
        shutdown_sent_ = true;
        return writer_->send_chunk(sse_event(error_body(*error_)));
      }
      if (f.reason == EndReason::cancelled) return false;  // the client is gone
      ensure_head();
      return writer_->send_chunk(sse_event(error_body(*error_)));
    }
    if (!stream_) {
      out.text += text;
      ChatAnswer a = read_chat_answer(spec_.answer, out.text, f.reason);
      out.reasoning = std::move(a.reasoning);
      out.text = std::move(a.content);
      out.tool_calls = std::move(a.tool_calls);
      out.finish_reason = std::move(a.finish_reason);
      return true;
    }
    if (failed_) return false;
    if (plain_text()) {
      return send_event(ChunkInput{.index = choice, .text = text, .finish_reason = finish_reason(f.reason)});
    }
    std::vector<grammar::ToolCall> calls;
    const ReasoningParts parts = answers_[static_cast<size_t>(choice)].finish(text, calls);
    out.finish_reason = take_tool_calls(std::move(calls), f.reason, out.tool_calls);
    if ((!parts.content.empty() || !parts.reasoning.empty()) &&
        !send_event(ChunkInput{.index = choice, .text = parts.content, .reasoning = parts.reasoning})) {
      return false;
    }
    return send_event(ChunkInput{.index = choice,
                                 .finish_reason = out.finish_reason,
                                 .tool_calls = out.tool_calls.empty() ? nullptr : &out.tool_calls});
  }

  void on_job_end(int32_t prompt_tokens) override {
    const Usage usage{.prompt_tokens = prompt_tokens, .completion_tokens = completion_tokens_};
    if (!stream_) {
      if (error_) {
        writer_->send(core_.error_reply(*error_));
      } else {
        writer_->send(HttpReply{.status = 200, .body = response_body(spec_.meta, outputs_, usage)});
      }
      return;
    }
    if (failed_) return;
    ensure_head();
    if (include_usage_) writer_->send_chunk(sse_event(usage_chunk_json(spec_.meta, usage)));
    writer_->send_chunk(sse_done());
    writer_->end();
  }

 private:
  // The output goes out as it comes: nothing to split or parse.
  bool plain_text() const { return answers_.empty() || answers_.front().plain(); }

  void ensure_head() {
    if (head_sent_) return;
    head_sent_ = true;
    writer_->send_head(HttpReply{.status = 200,
                                 .content_type = "text/event-stream; charset=utf-8",
                                 .headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}}});
  }

  bool send_event(ChunkInput in) {
    ensure_head();
    const auto i = static_cast<size_t>(in.index);
    if (spec_.meta.endpoint == Endpoint::chat && !role_sent_[i]) {
      in.role_first = true;
      role_sent_[i] = true;
    }
    in.usage_null = include_usage_;
    return writer_->send_chunk(sse_event(chunk_json(spec_.meta, in)));
  }

  const bool stream_;
  const bool include_usage_;
  // Touched only from the job's serialised listener calls.
  std::vector<ChoiceOutput> outputs_;
  std::vector<bool> role_sent_;
  std::vector<AnswerStream> answers_;  // one per choice
  int32_t completion_tokens_ = 0;
  bool head_sent_ = false;
  bool shutdown_sent_ = false;  // the shutdown error event went out
};

}  // namespace

std::shared_ptr<AsyncReply> make_generation_reply(ServerCore& core, JobSpec spec, bool stream, bool include_usage) {
  return std::make_shared<GenerationReply>(core, std::move(spec), stream, include_usage);
}

}  // namespace troupe::net
