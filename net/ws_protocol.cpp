// Client messages in, frames out. A request's listener holds only a weak
// reference to its connection, so a connection that closes while requests
// finish in the pipeline is released as soon as they end.
#include "net/ws_protocol.hpp"

#include "net/api_error.hpp"
#include "net/chat_answer.hpp"
#include "net/routes.hpp"

namespace troupe::net {

class WsConnection::RequestListener : public JobListener {
 public:
  RequestListener(std::weak_ptr<WsConnection> conn, std::shared_ptr<WsOutput> out, std::string id,
                  const JobSpec& spec)
      : conn_(std::move(conn)), out_(std::move(out)), id_(std::move(id)) {
    if (spec.answer.tools || spec.answer.harmony) answer_ = spec.answer;
  }

  bool on_token(int32_t, const TokenEvent& ev, std::string_view text,
                const std::vector<TokenLogprobs>* lps) override {
    if (answer_) output_ += text;
    // WebSocket requests have no echo: the token's own entry is the last.
    const TokenLogprobs* lp = lps != nullptr && !lps->empty() ? &lps->back() : nullptr;
    return out_->send_text(ws_token(id_, ev.index, ev.token, text, lp));
  }

  bool on_choice_end(int32_t, const FinalEvent& f, std::string_view text) override {
    if (f.reason == EndReason::error) {
      return out_->send_text(ws_error(id_, api_error_from(f.error_code, f.error_message, f.error_param)));
    }
    WsFinal final{.id = id_,
                  .finish_reason = to_string(f.reason),
                  .text = std::string(text),
                  .usage = {.prompt_tokens = f.prompt_tokens, .completion_tokens = f.completion_tokens},
                  .queue_seconds = f.queue_seconds,
                  .first_token_seconds = f.first_token_seconds,
                  .total_seconds = f.total_seconds};
    // The token frames carried the output as text; the final frame adds
    // the calls found in it.
    if (answer_ && f.reason != EndReason::cancelled) {
      output_ += text;
      ChatAnswer a = read_chat_answer(*answer_, output_, f.reason);
      final.tool_calls = std::move(a.tool_calls);
      if (!final.tool_calls.empty()) final.finish_reason = std::move(a.finish_reason);
    }
    return out_->send_text(ws_final(final));
  }

  void on_job_end(int32_t) override {
    if (auto c = conn_.lock()) c->finished(id_);
  }

 private:
  std::weak_ptr<WsConnection> conn_;
  std::shared_ptr<WsOutput> out_;
  std::string id_;
  std::optional<JobSpec::AnswerReading> answer_;  // with tools: how the output is read
  std::string output_;             // with tools: the whole output, read at the end
};

std::shared_ptr<WsConnection> WsConnection::create(ServerCore& core, std::shared_ptr<WsOutput> out) {
  return std::shared_ptr<WsConnection>(new WsConnection(core, std::move(out)));
}

std::string WsConnection::hello() const {
  const ServedModel& m = core_.backend().served_model();
  return ws_hello(m.id, core_.options().limits.ws_max_message_bytes, core_.options().limits.ws_max_requests,
                  m.engine.image_tokens > 0);
}

void WsConnection::send_error(const std::string& id, const ApiError& e) {
  core_.error_reply(e);  // counts it
  out_->send_text(ws_error(id, e));
}

void WsConnection::on_message(std::string_view text) {
  std::string id;
  try {
    WsClientMessage m = parse_ws_message(text, core_.options().limits.request, &id);
    if (m.kind == WsClientMessage::Kind::cancel) {
      cancel(m.id);
    } else {
      generate(m.id, m.request);
    }
  } catch (const ApiError& e) {
    send_error(id, e);
  } catch (const Error& e) {
    send_error(id, api_error_from(e.code(), e.what()));
  }
}

void WsConnection::generate(const std::string& id, const ParsedRequest& r) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    if (jobs_.count(id) != 0)
      throw invalid_field("id", "a request with id '" + id + "' is still running", "duplicate_id");
    if (jobs_.size() >= static_cast<size_t>(core_.options().limits.ws_max_requests)) {
      throw ApiError(429,
                     "at most " + std::to_string(core_.options().limits.ws_max_requests) +
                         " requests may run at once on one connection",
                     {}, "too_many_requests")
          .with_retry_after(1);
    }
  }
  JobSpec spec = core_.prepare(r, "websocket", /*check_model=*/!r.model.empty());
  core_.admit(spec);
  auto listener = std::make_shared<RequestListener>(weak_from_this(), out_, id, spec);
  auto job = GenerationJob::create(core_.backend(), core_.metrics(), core_.admission(), std::move(spec), listener);
  core_.jobs().add(job);
  {
    std::lock_guard lock(mutex_);
    jobs_[id] = job;
  }
  job->start();
}

void WsConnection::cancel(const std::string& id) {
  std::shared_ptr<GenerationJob> job;
  {
    std::lock_guard lock(mutex_);
    if (auto it = jobs_.find(id); it != jobs_.end()) job = it->second;
  }
  // Unknown ids are ignored: the request may have just ended (its final
  // frame is on its way), which is no error of the client's.
  if (job) job->cancel();
}

void WsConnection::finished(const std::string& id) {
  std::lock_guard lock(mutex_);
  jobs_.erase(id);
}

void WsConnection::on_closed() {
  std::map<std::string, std::shared_ptr<GenerationJob>, std::less<>> jobs;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    jobs.swap(jobs_);
  }
  for (auto& [id, job] : jobs) job->cancel();
}

size_t WsConnection::running() const {
  std::lock_guard lock(mutex_);
  return jobs_.size();
}

}  // namespace troupe::net
