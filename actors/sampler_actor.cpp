// Sampler actor: SeqOpen builds a request's Sampler, StepLogits samples each
// row, SeqClose forgets. Rows of requests it does not know (cancelled while
// the step ran) are answered "finished, no token".
#include "actors/sampler_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <unordered_map>

#include "actors/actor_meter.hpp"
#include "model/sampler.hpp"

namespace troupe {
namespace {

struct SamplerState {
  struct Seq {
    explicit Seq(const SeqOpen& open)
        : sampler(open.params.sampling),
          history(open.prompt),
          ignore_eos(open.params.ignore_eos),
          logprobs(open.params.sampling.logprobs || open.params.sampling.n_logprobs > 0) {}
    Sampler sampler;
    std::vector<int32_t> history;  // prompt + generated
    bool ignore_eos;
    bool logprobs;
  };
  std::shared_ptr<const Tokenizer> tokenizer;
  std::unordered_map<RequestId, Seq> seqs;
};

void sample_row(SamplerState& st, const StepLogits& in, size_t row, SampledToken& out) {
  const auto it = st.seqs.find(out.id);
  if (it == st.seqs.end()) {
    out.status = SampleStatus::skipped;
    return;
  }
  SamplerState::Seq& seq = it->second;
  try {
    const std::span<float> logits(in.logits->row(static_cast<int64_t>(row)),
                                  static_cast<size_t>(in.logits->cols));
    const int32_t token = seq.sampler.sample(logits, seq.history);
    seq.history.push_back(token);
    out.status = SampleStatus::token;
    out.token = token;
    out.finished = !seq.ignore_eos && st.tokenizer->is_eog(token);
    if (seq.logprobs) {
      out.logprob = seq.sampler.chosen_logprob();
      const std::span<const TokenLogprob> top = seq.sampler.top_logprobs();
      out.top_logprobs.assign(top.begin(), top.end());
    }
  } catch (const Error& e) {
    out.status = SampleStatus::failed;
    out.error_code = e.code();
    out.error = std::string("sampling failed: ") + e.what();
  } catch (const std::exception& e) {
    out.status = SampleStatus::failed;
    out.error_code = Errc::internal;
    out.error = std::string("sampling failed: ") + e.what();
  }
}

class SamplerImpl : public sampler_actor::base {
 public:
  SamplerImpl(caf::actor_config& cfg, std::shared_ptr<const Tokenizer> tokenizer) : sampler_actor::base(cfg) {
    state_.tokenizer = std::move(tokenizer);
  }

  behavior_type make_behavior() override {
    return {
        [this](SeqOpen& open) {
          // Parameters were validated by the scheduler; a Sampler that still
          // refuses them leaves the request unknown, so its rows end it.
          try {
            state_.seqs.erase(open.id);
            state_.seqs.emplace(open.id, SamplerState::Seq(open));
          } catch (const std::exception&) {
            state_.seqs.erase(open.id);
          }
        },
        [this](SeqClose& close) { state_.seqs.erase(close.id); },
        [this](StepLogits& in) -> SampledStep {
          SampledStep out{.step = in.step, .engine = in.engine, .compute_ns = in.compute_ns};
          out.tokens.resize(in.rows.size());
          const bool shaped = in.logits && in.logits->rows == static_cast<int64_t>(in.rows.size());
          for (size_t i = 0; i < in.rows.size(); ++i) {
            out.tokens[i].id = in.rows[i];
            if (shaped) {
              sample_row(state_, in, i, out.tokens[i]);
            } else {
              out.tokens[i].status = SampleStatus::failed;
              out.tokens[i].error = "logits of step " + std::to_string(in.step) + " do not match its rows";
            }
          }
          in.logits = nullptr;  // back to the last stage's pool before the reply travels
          return out;
        },
    };
  }

 private:
  SamplerState state_;
};

}  // namespace

sampler_actor spawn_sampler(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                            SamplerActorOptions options) {
  if (options.meter) {
    if (options.detached) {
      return system.spawn<Metered<SamplerImpl>, caf::detached>(std::move(options.meter), std::move(tokenizer));
    }
    return system.spawn<Metered<SamplerImpl>>(std::move(options.meter), std::move(tokenizer));
  }
  if (options.detached) return system.spawn<SamplerImpl, caf::detached>(std::move(tokenizer));
  return system.spawn<SamplerImpl>(std::move(tokenizer));
}

}  // namespace troupe
