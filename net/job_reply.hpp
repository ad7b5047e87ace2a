// The base of the replies that run one JobSpec through the pipeline (the
// OpenAI routes' JSON and SSE, Ollama's NDJSON, Anthropic's and the
// Responses API's events): the job is created, registered for a graceful
// shutdown and started when the transport starts the reply; a client that
// leaves cancels it. Subclasses are the JobListener that writes the body.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "net/api_error.hpp"
#include "net/generation.hpp"
#include "net/http_types.hpp"

namespace troupe::net {

class ServerCore;

class JobReply : public AsyncReply, public JobListener, public std::enable_shared_from_this<JobReply> {
 public:
  void start(std::shared_ptr<ReplyWriter> writer) override;
  void cancel() override;

 protected:
  JobReply(ServerCore& core, JobSpec spec) : core_(core), spec_(std::move(spec)) {}

  // A choice ended in error or cancellation (f.reason): keeps the error in
  // error_ and says whether a stream should write it as an event of its own
  // (it began, and the client is still there). Not streamed, or nothing
  // sent yet: false, and in the second case the error has gone out whole,
  // with its status, as `whole` writes it (failed_ set).
  bool stream_error(const FinalEvent& f, bool streamed, bool head_sent,
                    const std::function<HttpReply(const ApiError&)>& whole);

  ServerCore& core_;
  const JobSpec spec_;
  std::shared_ptr<ReplyWriter> writer_;
  std::optional<ApiError> error_;  // what the reply answers with instead of its body
  bool failed_ = false;            // the error went out whole: nothing more to write

 private:
  std::shared_ptr<GenerationJob> job_;
};

// The error a choice that ended in error or cancellation answers with: the
// engine's error as the API's, a shutdown as 503 server_shutting_down, a
// cancellation as 503 cancelled (both with Retry-After).
ApiError job_end_error(const FinalEvent& f);

}  // namespace troupe::net
