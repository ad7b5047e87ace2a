// Runs a JobSpec's choices through the Backend. The pipeline calls one
// request's callbacks serially, but different choices run on different
// threads: one mutex serialises the listener calls and the choice state.
#include "net/generation.hpp"

#include <chrono>

namespace troupe::net {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::shared_ptr<GenerationJob> GenerationJob::create(Backend& backend, Metrics& metrics, AdmissionControl& admission,
                                                     JobSpec spec, std::shared_ptr<JobListener> listener) {
  return std::shared_ptr<GenerationJob>(
      new GenerationJob(backend, metrics, admission, std::move(spec), std::move(listener)));
}

GenerationJob::GenerationJob(Backend& backend, Metrics& metrics, AdmissionControl& admission, JobSpec spec,
                             std::shared_ptr<JobListener> listener)
    : backend_(backend),
      metrics_(metrics),
      admission_(admission),
      spec_(std::move(spec)),
      listener_(std::move(listener)),
      choices_(spec_.choices.size()),
      remaining_(spec_.choices.size()) {
  for (size_t i = 0; i < choices_.size(); ++i) choices_[i].prefix = spec_.choices[i].echo;
}

void GenerationJob::start() {
  // Choices that never reach the pipeline still end (and release their
  // admission slot) through on_final, called once the lock is released.
  std::vector<std::pair<size_t, FinalEvent>> ended_here;
  {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < choices_.size(); ++i) {
      PreparedChoice& c = spec_.choices[i];
      const auto n_prompt = static_cast<int32_t>(c.prompt.size());
      metrics_.request_started(spec_.endpoint_label, n_prompt);
      if (cancelled_) {
        ended_here.emplace_back(i, FinalEvent{.reason = EndReason::cancelled,
                                              .error_code = Errc::cancelled,
                                              .error_message = "cancelled before it started",
                                              .prompt_tokens = n_prompt});
        continue;
      }
      auto self = shared_from_this();
      RequestCallbacks cb{.on_token = [self, i](const TokenEvent& ev) { self->on_token(i, ev); },
                          .on_final = [self, i](const FinalEvent& f) { self->on_final(i, f); }};
      try {
        // Callbacks may run before submit returns; they do not need the id.
        choices_[i].id = backend_.submit(c.prompt, c.params, std::move(cb));
        choices_[i].submitted = true;
      } catch (const Error& e) {
        ended_here.emplace_back(i, FinalEvent{.reason = EndReason::error,
                                              .error_code = e.code(),
                                              .error_message = e.what(),
                                              .prompt_tokens = n_prompt});
      } catch (const std::exception& e) {
        ended_here.emplace_back(i, FinalEvent{.reason = EndReason::error,
                                              .error_code = Errc::internal,
                                              .error_message = e.what(),
                                              .prompt_tokens = n_prompt});
      }
    }
  }
  for (const auto& [i, f] : ended_here) on_final(i, f);
}

void GenerationJob::cancel() {
  std::lock_guard lock(mutex_);
  cancel_locked();
}

void GenerationJob::cancel_locked() {
  cancelled_ = true;
  for (const Choice& c : choices_) {
    if (c.submitted && !c.ended) backend_.cancel(c.id);  // an actor message: does not block
  }
}

TokenLogprobs GenerationJob::logprobs_of(const TokenEvent& ev, int32_t offset) const {
  const Tokenizer& tok = backend_.tokenizer();
  TokenLogprobs lp;
  lp.chosen = token_alternative(tok.token_to_bytes(ev.token, true), ev.logprob);
  for (const TokenLogprob& alt : ev.top_logprobs) {
    lp.top.push_back(token_alternative(tok.token_to_bytes(alt.token, true), alt.logprob));
  }
  lp.text_offset = offset;
  return lp;
}

void GenerationJob::on_token(size_t i, const TokenEvent& ev) {
  std::lock_guard lock(mutex_);
  Choice& c = choices_[i];
  if (c.ended || !listener_) return;
  const int64_t now = now_ns();
  if (c.last_token_ns < 0) metrics_.first_token(static_cast<int32_t>(spec_.choices[i].prompt.size()));
  metrics_.token(c.last_token_ns < 0 ? -1.0 : static_cast<double>(now - c.last_token_ns) * 1e-9);
  c.last_token_ns = now;

  std::string text = std::move(c.prefix);
  c.prefix.clear();
  const int32_t token_offset = c.text_offset + static_cast<int32_t>(text.size());
  text += c.joiner.push(ev.text);
  c.text_offset += static_cast<int32_t>(text.size());
  const bool want_logprobs =
      spec_.choices[i].params.sampling.logprobs || spec_.choices[i].params.sampling.n_logprobs > 0;
  TokenLogprobs lp;
  if (want_logprobs) lp = logprobs_of(ev, token_offset);
  if (!listener_->on_token(static_cast<int32_t>(i), ev, text, want_logprobs ? &lp : nullptr)) cancel_locked();
}

void GenerationJob::on_final(size_t i, const FinalEvent& f) {
  std::shared_ptr<JobListener> done;
  {
    std::lock_guard lock(mutex_);
    Choice& c = choices_[i];
    if (c.ended) return;
    c.ended = true;
    metrics_.request_ended(f);
    admission_.release(f.total_seconds);
    std::string text = std::move(c.prefix);
    text += c.joiner.finish(f.tail_text);
    if (listener_ && !listener_->on_choice_end(static_cast<int32_t>(i), f, text)) cancel_locked();
    if (--remaining_ == 0) done = std::move(listener_);
  }
  // Outside the lock: the listener may drop the last reference to the job.
  if (done) done->on_job_end();
}

}  // namespace troupe::net
