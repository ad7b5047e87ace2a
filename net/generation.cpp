// Runs a JobSpec's choices through the EngineClient. The pipeline calls one
// request's callbacks serially, but different choices run on different
// threads: one mutex serialises the listener calls and the choice state.
#include "net/generation.hpp"

#include <chrono>
#include <cmath>

namespace troupe::net {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool wants_logprobs(const GenerateParams& p) { return p.sampling.logprobs || p.sampling.n_logprobs > 0; }

}  // namespace

std::shared_ptr<GenerationJob> GenerationJob::create(EngineClient& backend, Metrics& metrics, AdmissionControl& admission,
                                                     JobSpec spec, std::shared_ptr<JobListener> listener) {
  return std::shared_ptr<GenerationJob>(
      new GenerationJob(backend, metrics, admission, std::move(spec), std::move(listener)));
}

GenerationJob::GenerationJob(EngineClient& backend, Metrics& metrics, AdmissionControl& admission, JobSpec spec,
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
      if (cancelled_) {
        ended_here.emplace_back(i, FinalEvent{.reason = EndReason::cancelled,
                                              .error_code = Errc::cancelled,
                                              .error_message = "cancelled before it started"});
        continue;
      }
      auto self = shared_from_this();
      RequestCallbacks cb{.on_token = [self, i](const TokenEvent& ev) { self->on_token(i, ev); },
                          .on_final = [self, i](const FinalEvent& f) { self->on_final(i, f); },
                          .on_prompt = [self, i](const PromptEvent& ev) { self->on_prompt(i, ev); }};
      try {
        // Callbacks may run before submit returns; they do not need the id.
        // The request is copied: a listener may still read the spec.
        choices_[i].id = backend_.submit(c.request, std::move(cb));
        choices_[i].submitted = true;
      } catch (const Error& e) {
        ended_here.emplace_back(
            i, FinalEvent{.reason = EndReason::error, .error_code = e.code(), .error_message = e.what()});
      } catch (const std::exception& e) {
        ended_here.emplace_back(
            i, FinalEvent{.reason = EndReason::error, .error_code = Errc::internal, .error_message = e.what()});
      }
    }
  }
  for (const auto& [i, f] : ended_here) on_final(i, f);
}

void GenerationJob::cancel() {
  std::lock_guard lock(mutex_);
  cancel_locked();
}

void GenerationJob::shutdown() {
  std::lock_guard lock(mutex_);
  shutdown_ = true;
  cancel_locked();
}

void GenerationJob::cancel_locked() {
  cancelled_ = true;
  for (const Choice& c : choices_) {
    if (c.submitted && !c.ended) backend_.cancel(c.id);  // an actor message: does not block
  }
}

template <class Scored>
TokenLogprobs GenerationJob::logprobs_of(const Scored& ev, int32_t offset) const {
  auto alternative = [&](int32_t token, const std::string& bytes, float logprob) {
    TokenAlternative a = token_alternative(bytes, logprob);
    if (spec_.tokens_as_ids) a.token = "token_id:" + std::to_string(token);
    return a;
  };
  TokenLogprobs lp;
  lp.chosen = alternative(ev.token, ev.bytes, ev.logprob);
  for (size_t k = 0; k < ev.top_logprobs.size(); ++k) {
    const std::string& bytes = k < ev.top_bytes.size() ? ev.top_bytes[k] : std::string();
    lp.top.push_back(alternative(ev.top_logprobs[k].token, bytes, ev.top_logprobs[k].logprob));
  }
  lp.text_offset = offset;
  return lp;
}

void GenerationJob::on_prompt(size_t i, const PromptEvent& ev) {
  std::shared_ptr<JobListener> done;
  {
    std::lock_guard lock(mutex_);
    Choice& c = choices_[i];
    if (c.accepted || c.ended) return;
    c.accepted = true;
    c.prompt_tokens = ev.n_tokens;
    metrics_.request_started(spec_.endpoint_label, ev.n_tokens);
    if (spec_.choices[i].echo_prompt_text) c.prefix = ev.text;

    ++n_accepted_;
    done = open_gate_locked();
  }
  if (done) done->on_job_end(usage_prompt_tokens());
}

std::shared_ptr<JobListener> GenerationJob::open_gate_locked() {
  if (n_accepted_ < choices_.size() || refused_) return nullptr;
  // Every prompt is accepted: what came meanwhile goes out now.
  std::shared_ptr<JobListener> done;
  for (size_t k = 0; k < choices_.size(); ++k) {
    Choice& h = choices_[k];
    std::vector<TokenEvent> tokens = std::move(h.held_tokens);
    h.held_tokens.clear();
    for (const TokenEvent& t : tokens) deliver_token(k, t);
    if (h.held_final) {
      const FinalEvent f = std::move(*h.held_final);
      h.held_final.reset();
      if (auto l = deliver_final(k, f)) done = std::move(l);
    }
  }
  return done;
}

void GenerationJob::on_token(size_t i, const TokenEvent& ev) {
  std::lock_guard lock(mutex_);
  Choice& c = choices_[i];
  if (c.ended || !listener_) return;
  const int64_t now = now_ns();
  if (c.last_token_ns < 0) metrics_.first_token(c.prompt_tokens);
  metrics_.token(c.last_token_ns < 0 ? -1.0 : static_cast<double>(now - c.last_token_ns) * 1e-9);
  c.last_token_ns = now;
  if (n_accepted_ < choices_.size()) {
    if (!refused_) c.held_tokens.push_back(ev);
    return;
  }
  deliver_token(i, ev);
}

void GenerationJob::deliver_token(size_t i, const TokenEvent& ev) {
  Choice& c = choices_[i];
  if (!listener_) return;
  std::string text = std::move(c.prefix);
  c.prefix.clear();
  const bool logprobs = wants_logprobs(spec_.choices[i].request.params);
  std::vector<TokenLogprobs> lps;
  if (logprobs && !ev.prompt_scores.empty()) {
    // Echo (only the first event has them): the prompt's tokens first, the
    // first one unscored (nothing precedes it), with their offsets in the
    // echoed text.
    // Offsets into the echoed text (`text`): a token advances by its bytes
    // where the text has them, or them without the leading space a
    // SentencePiece prompt's first word lost; a token the text does not
    // show (BOS written out) takes no room.
    size_t at = 0;
    for (const TokenScore& sc : ev.prompt_scores) {
      TokenLogprobs lp = logprobs_of(sc, c.text_offset + static_cast<int32_t>(at));
      lp.unscored = std::isnan(sc.logprob);
      const std::string_view b = sc.bytes;
      if (!b.empty() && text.compare(at, b.size(), b) == 0) {
        at += b.size();
      } else if (b.size() > 1 && b[0] == ' ' && text.compare(at, b.size() - 1, b.substr(1)) == 0) {
        at += b.size() - 1;
      }
      lps.push_back(std::move(lp));
    }
  }
  const int32_t token_offset = c.text_offset + static_cast<int32_t>(text.size());
  text += c.joiner.push(ev.text);
  c.text_offset += static_cast<int32_t>(text.size());
  if (logprobs) {
    lps.push_back(logprobs_of(ev, token_offset));
  }
  if (!listener_->on_token(static_cast<int32_t>(i), ev, text, logprobs ? &lps : nullptr)) cancel_locked();
}

void GenerationJob::on_final(size_t i, const FinalEvent& final_event) {
  std::shared_ptr<JobListener> done;
  {
    std::lock_guard lock(mutex_);
    // Shutdown (GenerationJob::shutdown): the cancel says why.
    FinalEvent f = final_event;
    if (shutdown_ && f.reason == EndReason::cancelled) {
      f.error_code = Errc::unavailable;
      f.error_message = kShutdownMessage;
    }
    Choice& c = choices_[i];
    if (c.ended) return;
    c.ended = true;
    if (!c.accepted) {
      // Refused at the front door (or cancelled first): it never started.
      metrics_.request_started(spec_.endpoint_label, 0);
    }
    metrics_.request_ended(f);
    admission_.release(f.total_seconds);
    const bool gated = n_accepted_ < choices_.size() && !refused_;
    if (gated && f.reason != EndReason::error) {
      c.held_final = f;  // delivered once every choice is accepted
      if (!c.accepted) {
        // Cancelled before its prompt was accepted: it never will be.
        c.accepted = true;
        ++n_accepted_;
        done = open_gate_locked();
      }
    } else {
      done = end_choice_locked(i, f, gated);
    }
  }
  // Outside the lock: the listener may drop the last reference to the job.
  if (done) done->on_job_end(usage_prompt_tokens());
}

std::shared_ptr<JobListener> GenerationJob::end_choice_locked(size_t i, const FinalEvent& f, bool gated) {
  if (gated) {
    // Refused (or failed) while others wait: the request fails with this
    // error alone; what the others held is dropped and they are cancelled.
    refused_ = true;
    for (Choice& h : choices_) {
      h.held_tokens.clear();
      h.held_final.reset();
    }
  }
  std::shared_ptr<JobListener> done = deliver_final(i, f);
  if (refused_) {
    // The held finals were dropped: those choices are over for the listener.
    remaining_ = 0;
    for (const Choice& h : choices_) remaining_ += h.ended ? 0 : 1;
    cancel_locked();
    if (remaining_ == 0 && listener_) done = std::move(listener_);
  }
  return done;
}

std::shared_ptr<JobListener> GenerationJob::deliver_final(size_t i, const FinalEvent& f) {
  Choice& c = choices_[i];
  std::string text = std::move(c.prefix);
  c.prefix.clear();
  text += c.joiner.finish(f.tail_text);
  if (listener_ && !listener_->on_choice_end(static_cast<int32_t>(i), f, text)) cancel_locked();
  if (remaining_ > 0) --remaining_;
  return remaining_ == 0 ? std::move(listener_) : nullptr;
}

int32_t GenerationJob::usage_prompt_tokens() const {
  int32_t n = 0;
  for (size_t i = 0; i < choices_.size(); ++i) {
    if (spec_.choices[i].counts_prompt) n += choices_[i].prompt_tokens;
  }
  return n;
}

}  // namespace troupe::net
