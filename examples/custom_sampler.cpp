// Plugging one's own actors into the pipeline: a custom sampler (a CAF actor
// implementing troupe::sampler_actor) that writes lipograms - greedy
// decoding over only the tokens without the letter 'e' - and an observer
// actor that sees every request's token stream.
//   custom_sampler MODEL.gguf [MAX_NEW_TOKENS]
#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_set>

#include "actors/pipeline_extensions.hpp"
#include "model/model_tokenizer.hpp"

namespace {

struct LipogramState {
  std::shared_ptr<const troupe::Tokenizer> tokenizer;
  std::vector<bool> allowed;                  // [n_vocab]
  std::unordered_set<troupe::RequestId> live;  // between SeqOpen and SeqClose
};

troupe::sampler_actor::behavior_type lipogram_sampler(troupe::sampler_actor::stateful_pointer<LipogramState> self,
                                                      std::shared_ptr<const troupe::Model> model) {
  LipogramState& st = self->state;
  st.tokenizer = troupe::load_model_tokenizer(*model);
  for (int32_t id = 0; id < st.tokenizer->n_vocab(); ++id) {
    const std::string bytes = st.tokenizer->token_to_bytes(id);
    st.allowed.push_back(bytes.find_first_of("eE") == std::string::npos);
  }
  return {
      [self](troupe::SeqOpen& open) { self->state.live.insert(open.id); },
      [self](troupe::SeqClose& close) { self->state.live.erase(close.id); },
      [self](troupe::StepLogits& in) -> troupe::SampledStep {
        const LipogramState& s = self->state;
        troupe::SampledStep out{.step = in.step, .engine = in.engine};
        for (size_t row = 0; row < in.rows.size(); ++row) {
          troupe::SampledToken t{.id = in.rows[row]};  // status skipped: cancelled while the step ran
          if (s.live.count(t.id) != 0) {
            const float* logits = in.logits->row(static_cast<int64_t>(row));
            int32_t best = -1;
            for (int32_t id = 0; id < static_cast<int32_t>(in.logits->cols); ++id) {
              if (s.allowed[static_cast<size_t>(id)] && (best < 0 || logits[id] > logits[best])) best = id;
            }
            if (best >= 0) {
              t = troupe::SampledToken::chosen(t.id, best, s.tokenizer->is_eog(best));
            } else {
              t.status = troupe::SampleStatus::failed;
              t.error = "no token is allowed";
            }
          }
          out.tokens.push_back(std::move(t));
        }
        return out;
      },
  };
}

struct CounterState {
  int64_t tokens = 0;
};

troupe::observer_actor::behavior_type counter_behavior(troupe::observer_actor::stateful_pointer<CounterState> self,
                                                       std::string name) {
  std::printf("[%s] watching every request\n", name.c_str());
  return {
      [](const troupe::PromptEvent&) {},
      [self](const troupe::TokenEvent&) { ++self->state.tokens; },
      [self](const troupe::FinalEvent& f) {
        std::printf("[observer] request %lld ended (%s); %lld tokens seen so far\n", static_cast<long long>(f.id),
                    troupe::to_string(f.reason), static_cast<long long>(self->state.tokens));
      },
  };
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [MAX_NEW_TOKENS]\n", argv[0]);
    return 2;
  }
  try {
    troupe::PipelineExtensions ext;
    ext.make_sampler = [](caf::actor_system& sys, const std::shared_ptr<const troupe::Model>& model) {
      return sys.spawn(lipogram_sampler, model);
    };
    ext.observers.push_back([](caf::actor_system& sys) { return sys.spawn(counter_behavior, std::string("observer")); });
    auto pipeline = troupe::Pipeline::start({.model_path = argv[1]}, ext);

    const troupe::GenerateParams params{.max_new_tokens = argc > 2 ? std::atoi(argv[2]) : 48};
    int status = 0;
    for (const char* prompt : {"Once upon a time", "A big cat"}) {
      const troupe::Completion c = pipeline->generate(troupe::TextPrompt{.text = prompt}, params).get();
      std::printf("%s|%s\nfinish: %s\n", prompt, c.text.c_str(), troupe::to_string(c.final.reason));
      if (c.text.find_first_of("eE") != std::string::npos) {
        std::printf("the generated text has an 'e': the custom sampler was not used\n");
        status = 1;
      }
    }
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_sampler: %s\n", e.what());
    return 1;
  }
}
