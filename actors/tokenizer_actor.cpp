// Tokenizer actor: Tokenizer::encode on its own thread.
#include "actors/tokenizer_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "core/error.hpp"

namespace troupe {
namespace {

tokenizer_actor::behavior_type tokenizer_behavior(tokenizer_actor::pointer self,
                                                  std::shared_ptr<const Tokenizer> tokenizer,
                                                  scheduler_actor scheduler,
                                                  detokenizer_actor detokenizer) {
  return {
      [=](TextRequest& r) {
        auto fail = [&](Errc code, const std::string& what) {
          self->send(detokenizer, RequestDone{.id = r.id,
                                              .reason = EndReason::error,
                                              .code = code,
                                              .message = "request " + std::to_string(r.id) +
                                                         ": cannot tokenize the prompt: " + what});
        };
        try {
          std::vector<int32_t> ids =
              tokenizer->encode(r.prompt.text, r.prompt.add_special, r.prompt.parse_special);
          self->send(scheduler, TokenRequest{.id = r.id,
                                             .prompt = std::move(ids),
                                             .params = std::move(r.params),
                                             .submit_ns = r.submit_ns});
        } catch (const Error& e) {
          fail(e.code(), e.what());
        } catch (const std::exception& e) {
          fail(Errc::internal, e.what());
        }
      },
  };
}

}  // namespace

tokenizer_actor spawn_tokenizer(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                                scheduler_actor scheduler, detokenizer_actor detokenizer) {
  return system.spawn<caf::detached>(tokenizer_behavior, std::move(tokenizer), std::move(scheduler),
                                     std::move(detokenizer));
}

}  // namespace troupe
