// Tokenizer actor: Tokenizer::encode on its own thread.
#include "actors/tokenizer_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/actor_meter.hpp"
#include "core/error.hpp"

namespace troupe {
namespace {

class TokenizerImpl : public tokenizer_actor::base {
 public:
  TokenizerImpl(caf::actor_config& cfg, std::shared_ptr<const Tokenizer> tokenizer, scheduler_actor scheduler,
                detokenizer_actor detokenizer)
      : tokenizer_actor::base(cfg),
        tokenizer_(std::move(tokenizer)),
        scheduler_(std::move(scheduler)),
        detokenizer_(std::move(detokenizer)) {}

  behavior_type make_behavior() override {
    return {
        [this](TextRequest& r) { encode(r); },
    };
  }

  void on_exit() override {
    scheduler_ = nullptr;
    detokenizer_ = nullptr;
  }

 private:
  void encode(TextRequest& r) {
    auto fail = [&](Errc code, const std::string& what) {
      send(detokenizer_, RequestDone{.id = r.id,
                                     .reason = EndReason::error,
                                     .code = code,
                                     .message = "request " + std::to_string(r.id) +
                                                ": cannot tokenize the prompt: " + what});
    };
    try {
      std::vector<int32_t> ids = tokenizer_->encode(r.prompt.text, r.prompt.add_special, r.prompt.parse_special);
      send(scheduler_, TokenRequest{.id = r.id,
                                    .prompt = std::move(ids),
                                    .params = std::move(r.params),
                                    .submit_ns = r.submit_ns});
    } catch (const Error& e) {
      fail(e.code(), e.what());
    } catch (const std::exception& e) {
      fail(Errc::internal, e.what());
    }
  }

  std::shared_ptr<const Tokenizer> tokenizer_;
  scheduler_actor scheduler_;
  detokenizer_actor detokenizer_;
};

}  // namespace

tokenizer_actor spawn_tokenizer(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                                scheduler_actor scheduler, detokenizer_actor detokenizer,
                                std::shared_ptr<ActorMeter> meter) {
  if (meter) {
    return system.spawn<Metered<TokenizerImpl>, caf::detached>(std::move(meter), std::move(tokenizer),
                                                              std::move(scheduler), std::move(detokenizer));
  }
  return system.spawn<TokenizerImpl, caf::detached>(std::move(tokenizer), std::move(scheduler),
                                                    std::move(detokenizer));
}

}  // namespace troupe
