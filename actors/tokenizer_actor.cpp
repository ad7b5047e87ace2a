// Tokenizer actor: a PromptReader on its own thread.
#include "actors/tokenizer_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/actor_meter.hpp"
#include "actors/prompt_reader.hpp"
#include "actors/request_refusal.hpp"
#include "core/error.hpp"

namespace troupe {
namespace {

class TokenizerImpl : public tokenizer_actor::base {
 public:
  TokenizerImpl(caf::actor_config& cfg, TokenizerActorOptions options, scheduler_actor scheduler,
                detokenizer_actor detokenizer)
      : tokenizer_actor::base(cfg),
        reader_(std::move(options.tokenizer), std::move(options.prompter), std::move(options.model)),
        refused_(std::move(options.refused)),
        vision_(std::move(options.vision)),
        scheduler_(std::move(scheduler)),
        detokenizer_(std::move(detokenizer)) {}

  behavior_type make_behavior() override {
    return {
        [this](PromptRequest& r) { admit(r); },
        [this](TokenizeQuery& q) { return reader_.tokenize(std::move(q.request), q.detokenize); },
    };
  }

  void on_exit() override {
    vision_ = nullptr;
    scheduler_ = nullptr;
    detokenizer_ = nullptr;
  }

 private:
  void admit(PromptRequest& r) {
    try {
      EngineRequest& q = r.request;
      std::vector<ImageSpan> spans;
      std::vector<int32_t> ids = reader_.admit(q, vision_ ? &spans : nullptr);
      PromptEvent ev{.id = r.id, .n_tokens = static_cast<int32_t>(ids.size())};
      if (q.return_prompt) {
        ev.tokens = ids;
        ev.text = reader_.text_of(ids);
      }
      TokenRequest t{.id = r.id, .prompt = std::move(ids), .params = std::move(q.params), .submit_ns = r.submit_ns};
      if (!spans.empty()) {
        // The vision actor sends the PromptEvent once the images are read,
        // so a bad image is refused as a bad prompt is.
        for (size_t i = 0; i < spans.size(); ++i) {
          ChatImage& im = q.chat.images[i];
          t.images.push_back({.position = spans[i].position,
                              .n_tokens = spans[i].n_tokens,
                              .bytes = std::move(im.bytes),
                              .param = std::move(im.param),
                              .open = reader_.model().image_open});
        }
        send(vision_, VisionRequest{.event = std::move(ev), .request = std::move(t)});
        return;
      }
      // The detokenizer has the PromptEvent before anything the scheduler
      // sends about this request: this enqueue comes first.
      send(detokenizer_, std::move(ev));
      send(scheduler_, std::move(t));
    } catch (const RequestError& e) {
      refuse(r.id, e.code(), e.what(), e.param());
    } catch (const Error& e) {
      refuse(r.id, e.code(), e.what(), {});
    } catch (const std::exception& e) {
      refuse(r.id, Errc::internal, e.what(), {});
    }
  }

  void refuse(RequestId id, Errc code, const std::string& what, std::string param) {
    send(detokenizer_, refusal(id, code, what, std::move(param), refused_.get()));
  }

  PromptReader reader_;
  std::shared_ptr<std::atomic<uint64_t>> refused_;
  vision_actor vision_;
  scheduler_actor scheduler_;
  detokenizer_actor detokenizer_;
};

}  // namespace

tokenizer_actor spawn_tokenizer(caf::actor_system& system, TokenizerActorOptions options, scheduler_actor scheduler,
                                detokenizer_actor detokenizer) {
  std::shared_ptr<ActorMeter> meter = std::move(options.meter);
  if (meter) {
    return system.spawn<Metered<TokenizerImpl>, caf::detached>(std::move(meter), std::move(options),
                                                              std::move(scheduler), std::move(detokenizer));
  }
  return system.spawn<TokenizerImpl, caf::detached>(std::move(options), std::move(scheduler), std::move(detokenizer));
}

}  // namespace troupe
