// Sampler actor: SeqOpen builds a request's Sampler, StepLogits samples each
// row, SeqClose forgets. Rows of requests it does not know (cancelled while
// the step ran) are answered "finished, no token".
#include "actors/sampler_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <unordered_map>

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
    out.finished = true;
    return;
  }
  SamplerState::Seq& seq = it->second;
  try {
    const std::span<float> logits(in.logits->row(static_cast<int64_t>(row)),
                                  static_cast<size_t>(in.logits->cols));
    const int32_t token = seq.sampler.sample(logits, seq.history);
    seq.history.push_back(token);
    out.token = token;
    out.finished = !seq.ignore_eos && st.tokenizer->is_eog(token);
    if (seq.logprobs) {
      out.logprob = seq.sampler.chosen_logprob();
      const std::span<const TokenLogprob> top = seq.sampler.top_logprobs();
      out.top_logprobs.assign(top.begin(), top.end());
    }
  } catch (const std::exception& e) {
    out.token = -1;
    out.finished = true;
    out.error = std::string("sampling failed: ") + e.what();
  }
}

sampler_actor::behavior_type sampler_behavior(sampler_actor::stateful_pointer<SamplerState> self,
                                              std::shared_ptr<const Tokenizer> tokenizer) {
  self->state.tokenizer = std::move(tokenizer);
  return {
      [self](SeqOpen& open) {
        // Parameters were validated by the scheduler; a Sampler that still
        // refuses them leaves the request unknown, so its rows end it.
        try {
          self->state.seqs.erase(open.id);
          self->state.seqs.emplace(open.id, SamplerState::Seq(open));
        } catch (const std::exception&) {
          self->state.seqs.erase(open.id);
        }
      },
      [self](SeqClose& close) { self->state.seqs.erase(close.id); },
      [self](StepLogits& in) -> SampledStep {
        SampledStep out{.step = in.step, .engine = in.engine};
        out.tokens.resize(in.rows.size());
        const bool shaped = in.logits && in.logits->rows == static_cast<int64_t>(in.rows.size());
        for (size_t i = 0; i < in.rows.size(); ++i) {
          out.tokens[i].id = in.rows[i];
          if (shaped) {
            sample_row(self->state, in, i, out.tokens[i]);
          } else {
            out.tokens[i].finished = true;
            out.tokens[i].error = "logits of step " + std::to_string(in.step) + " do not match its rows";
          }
        }
        in.logits = nullptr;  // back to the last stage's pool before the reply travels
        return out;
      },
  };
}

}  // namespace

sampler_actor spawn_sampler(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                            SamplerActorOptions options) {
  if (options.detached) return system.spawn<caf::detached>(sampler_behavior, std::move(tokenizer));
  return system.spawn(sampler_behavior, std::move(tokenizer));
}

}  // namespace troupe
