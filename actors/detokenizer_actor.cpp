// Detokenizer actor: RequestOpen registers a sink, the tokenizer's
// PromptEvent goes to it first, SeqOpen adds the prompt size and admission
// time, SampledStep streams TokenEvents (and holds an embedding request's
// vector), RequestDone (or a matched stop string) sends the FinalEvent.
// Observers get a copy of all.
#include "actors/detokenizer_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "actors/actor_meter.hpp"
#include "actors/stop_strings.hpp"
#include "tokenizer/incremental_decoder.hpp"

namespace troupe {
namespace {

double seconds_between(int64_t from_ns, int64_t to_ns) { return static_cast<double>(to_ns - from_ns) * 1e-9; }

class DetokenizerImpl : public detokenizer_actor::base {
 public:
  DetokenizerImpl(caf::actor_config& cfg, std::shared_ptr<const Tokenizer> tokenizer,
                  std::shared_ptr<AnomalyMonitor> monitor, AnomalyOptions anomaly)
      : detokenizer_actor::base(cfg),
        tokenizer_(std::move(tokenizer)),
        monitor_(std::move(monitor)),
        ttfts_(anomaly) {
    if (tokenizer_->strips_leading_space()) {
      for (int32_t id = 0; id < tokenizer_->n_vocab() && prime_token_ < 0; ++id) {
        const std::string b = tokenizer_->token_to_bytes(id);
        const bool plain = !b.empty() && b[0] != ' ' &&
                           std::all_of(b.begin(), b.end(), [](char c) { return (c & 0x80) == 0; });
        if (plain) prime_token_ = id;
      }
    }
  }

  behavior_type make_behavior() override {
    return {
        [this](RequestOpen& open, sink_actor& sink) {
          streams_.erase(open.id);
          streams_.emplace(open.id, Stream(*tokenizer_, open, std::move(sink)));
        },
        [this](PromptEvent& ev) {
          const auto it = streams_.find(ev.id);
          if (it == streams_.end()) return;  // cancelled meanwhile
          it->second.prompt_tokens = ev.n_tokens;
          deliver(it->second, std::move(ev));
        },
        [this](SeqOpen& open) {
          const auto it = streams_.find(open.id);
          if (it == streams_.end()) return;
          Stream& s = it->second;
          s.admit_ns = open.admit_ns;
          s.prompt_tokens = static_cast<int32_t>(open.prompt.size());
          if (open.params.prompt_logprobs && !open.prompt.empty() && s.prompt_scores.empty()) {
            s.prompt_scores.push_back({.token = open.prompt[0],
                                       .logprob = std::numeric_limits<float>::quiet_NaN(),
                                       .bytes = tokenizer_->token_to_bytes(open.prompt[0], /*special=*/true)});
          }
          // The output continues the prompt's text. A decoder that starts
          // fresh drops the first space (SentencePiece's add_space_prefix
          // undone, right for a text's start only), so when the prompt has
          // text, feed the decoder one plain ASCII token first and discard
          // it: "The dog" + "▁was" then streams " was", as decoding prompt +
          // output and removing the prompt's text would.
          if (prime_token_ >= 0 && !s.primed) {
            const bool has_text = std::any_of(open.prompt.begin(), open.prompt.end(),
                                              [&](int32_t t) { return !tokenizer_->token_to_bytes(t).empty(); });
            if (has_text) s.decoder.push(prime_token_);
          }
          s.primed = true;
        },
        [this](SampledStep& step) {
          for (SampledToken& t : step.tokens) {
            if (t.status != SampleStatus::token && t.status != SampleStatus::scored &&
                t.status != SampleStatus::embedded) {
              continue;
            }
            const auto it = streams_.find(t.id);
            if (it == streams_.end()) continue;
            if (t.status == SampleStatus::embedded) {
              it->second.embedding = std::move(t.embedding);  // the FinalEvent carries it
            } else if (t.status == SampleStatus::token) {
              on_token(it, t);
            } else {
              it->second.prompt_scores.push_back(score_of(t));
            }
          }
        },
        [this](RequestDone& done) {
          const auto it = streams_.find(done.id);
          if (it == streams_.end()) return;  // ended here already (stop string)
          finish(it, done.reason, done.code, std::move(done.message), std::move(done.param));
        },
        [this](caf::connect_atom, scheduler_actor scheduler) { scheduler_ = std::move(scheduler); },
        [this](caf::add_atom, observer_actor observer) { observers_.push_back(std::move(observer)); },
        [this](shutdown_atom) -> caf::ok_atom {
          while (!streams_.empty()) {
            finish(streams_.begin(), EndReason::cancelled, Errc::cancelled,
                   "request " + std::to_string(streams_.begin()->first) + ": the pipeline shut down");
          }
          return caf::ok_atom::value;
        },
    };
  }

  void on_exit() override {
    streams_.clear();
    observers_.clear();
    scheduler_ = nullptr;
  }

 private:
  struct Stream {
    Stream(const Tokenizer& tokenizer, const RequestOpen& open, sink_actor s)
        : sink(std::move(s)),
          submit_ns(open.submit_ns),
          logprobs(open.params.sampling.logprobs || open.params.sampling.n_logprobs > 0),
          decoder(tokenizer),
          stops(open.params.stop) {}
    sink_actor sink;
    int64_t submit_ns = 0;
    int64_t admit_ns = 0;        // 0 until first scheduled
    int64_t first_token_ns = 0;  // 0 until the first token
    int32_t prompt_tokens = 0;
    int32_t n_tokens = 0;
    bool logprobs = false;
    bool primed = false;  // the decoder knows whether the output starts a text
    IncrementalDecoder decoder;
    StopStringMatcher stops;
    std::vector<TokenScore> prompt_scores;  // prompt logprobs, for the first TokenEvent
    std::vector<float> embedding;           // an embedding request's vector, for the FinalEvent
  };

  TokenScore score_of(SampledToken& t) const {
    TokenScore sc{.token = t.token,
                  .logprob = t.logprob,
                  .top_logprobs = std::move(t.top_logprobs),
                  .bytes = tokenizer_->token_to_bytes(t.token, /*special=*/true)};
    for (const TokenLogprob& alt : sc.top_logprobs) {
      sc.top_bytes.push_back(tokenizer_->token_to_bytes(alt.token, /*special=*/true));
    }
    return sc;
  }
  using StreamIt = std::unordered_map<RequestId, Stream>::iterator;

  void on_token(StreamIt it, SampledToken& t) {
    Stream& s = it->second;
    if (s.first_token_ns == 0) {
      s.first_token_ns = steady_now_ns();
      watch_ttft(t.id, s);
    }
    TokenEvent ev{.id = t.id, .index = s.n_tokens++, .token = t.token};
    StopStringMatcher::Result r;
    try {
      r = s.stops.push(s.decoder.push(t.token));
    } catch (const std::exception& e) {
      // A token outside the vocabulary (a custom sampler's bug): this
      // request ends in error, the scheduler frees it.
      send(scheduler_, stop_atom_v, t.id);
      finish(it, EndReason::error, Errc::internal,
             "request " + std::to_string(t.id) + ": cannot decode token " + std::to_string(t.token) + ": " +
                 e.what());
      return;
    }
    ev.text = std::move(r.text);
    if (s.logprobs) {
      ev.logprob = t.logprob;
      ev.top_logprobs = std::move(t.top_logprobs);
      ev.bytes = tokenizer_->token_to_bytes(t.token, /*special=*/true);
      for (const TokenLogprob& alt : ev.top_logprobs) {
        ev.top_bytes.push_back(tokenizer_->token_to_bytes(alt.token, /*special=*/true));
      }
    }
    ev.prompt_scores = std::move(s.prompt_scores);
    s.prompt_scores.clear();
    deliver(s, std::move(ev));
    if (r.stopped) {
      send(scheduler_, stop_atom_v, t.id);
      FinalEvent f = final_event(it, EndReason::stop);
      f.stop_string = std::move(r.stop);
      deliver(s, std::move(f));
      streams_.erase(it);
    }
  }

  // Releases what is still held back, then the final event.
  void finish(StreamIt it, EndReason reason, Errc code, std::string message, std::string param = {}) {
    Stream& s = it->second;
    StopStringMatcher::Result r = s.stops.push(s.decoder.flush());
    std::string tail = std::move(r.text);
    if (!r.stopped) tail += s.stops.flush();
    if (r.stopped && (reason == EndReason::stop || reason == EndReason::length)) reason = EndReason::stop;
    FinalEvent f = final_event(it, reason);
    f.tail_text = std::move(tail);
    if (reason == EndReason::stop) f.embedding = std::move(s.embedding);
    if (r.stopped && reason == EndReason::stop) f.stop_string = std::move(r.stop);
    if (reason == EndReason::error) {
      f.error_code = code;
      f.error_message = std::move(message);
      f.error_param = std::move(param);
    } else if (reason == EndReason::cancelled) {
      f.error_code = Errc::cancelled;
      f.error_message = std::move(message);
    }
    deliver(s, std::move(f));
    streams_.erase(it);
  }

  FinalEvent final_event(StreamIt it, EndReason reason) const {
    const Stream& s = it->second;
    const int64_t now = steady_now_ns();
    return {.id = it->first,
            .reason = reason,
            .prompt_tokens = s.prompt_tokens,
            .completion_tokens = s.n_tokens,
            .queue_seconds = seconds_between(s.submit_ns, s.admit_ns != 0 ? s.admit_ns : now),
            .first_token_seconds = s.first_token_ns != 0 ? seconds_between(s.submit_ns, s.first_token_ns) : 0.0,
            .total_seconds = seconds_between(s.submit_ns, now)};
  }

  // TTFT against the baseline of its prompt-length class.
  void watch_ttft(RequestId id, const Stream& s) {
    if (!monitor_) return;
    const double ttft = seconds_between(s.submit_ns, s.first_token_ns);
    const EwmaDetector::Verdict v = ttfts_.observe(0, s.prompt_tokens, ttft);
    if (!v.anomaly) return;
    monitor_->report({.metric = "ttft",
                      .value_s = ttft,
                      .baseline_s = v.baseline,
                      .deviation_s = v.deviation,
                      .requests = {id},
                      .detail = BucketedDetector::bucket_name("prompt", s.prompt_tokens)});
  }

  template <class Event>
  void deliver(const Stream& s, Event&& ev) {
    for (const observer_actor& o : observers_) send(o, ev);
    send(s.sink, std::forward<Event>(ev));
  }

  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<AnomalyMonitor> monitor_;
  BucketedDetector ttfts_;
  int32_t prime_token_ = -1;  // a plain ASCII token (tokenizers that strip a leading space only)
  scheduler_actor scheduler_;
  std::vector<observer_actor> observers_;
  std::unordered_map<RequestId, Stream> streams_;
};

}  // namespace

detokenizer_actor spawn_detokenizer(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                                    DetokenizerOptions options) {
  if (options.meter) {
    return system.spawn<Metered<DetokenizerImpl>>(std::move(options.meter), std::move(tokenizer),
                                                  std::move(options.monitor), options.anomaly);
  }
  return system.spawn<DetokenizerImpl>(std::move(tokenizer), std::move(options.monitor), options.anomaly);
}

}  // namespace troupe
