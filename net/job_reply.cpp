#include "net/job_reply.hpp"

#include "net/routes.hpp"

namespace troupe::net {

void JobReply::start(std::shared_ptr<ReplyWriter> writer) {
  writer_ = std::move(writer);
  job_ = GenerationJob::create(core_.backend(), core_.metrics(), core_.admission(), spec_, shared_from_this());
  core_.jobs().add(job_);
  job_->start();
}

void JobReply::cancel() {
  if (job_) job_->cancel();
}

bool JobReply::stream_error(const FinalEvent& f, bool streamed, bool head_sent,
                            const std::function<HttpReply(const ApiError&)>& whole) {
  error_ = job_end_error(f);
  if (!streamed || failed_) return false;
  if (!head_sent) {
    failed_ = true;
    writer_->send(whole(*error_));
    return false;
  }
  return f.reason == EndReason::error || ended_by_shutdown(f);  // else cancelled: the client is gone
}

ApiError job_end_error(const FinalEvent& f) {
  if (ended_by_shutdown(f)) return ApiError(503, f.error_message, {}, "server_shutting_down").with_retry_after(1);
  if (f.reason == EndReason::error) return api_error_from(f.error_code, f.error_message, f.error_param);
  return ApiError(503, "the request was cancelled: " + f.error_message, {}, "cancelled").with_retry_after(1);
}

}  // namespace troupe::net
