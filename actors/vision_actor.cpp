// Vision actor: a VisionEncoder on its own thread.
#include "actors/vision_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <string_view>

#include "actors/actor_meter.hpp"
#include "actors/image_feature_cache.hpp"
#include "actors/request_refusal.hpp"
#include "core/error.hpp"
#include "vision/vision_encoder.hpp"

namespace troupe {
namespace {

// The decoder's sentence without its own "image: " prefix (the refusal
// names the image already).
std::string reason_of(const Error& e) {
  constexpr std::string_view kPrefix = "image: ";
  const std::string_view what = e.what();
  return std::string(what.starts_with(kPrefix) ? what.substr(kPrefix.size()) : what);
}

class VisionImpl : public vision_actor::base {
 public:
  VisionImpl(caf::actor_config& cfg, VisionActorOptions options, scheduler_actor scheduler,
             detokenizer_actor detokenizer)
      : vision_actor::base(cfg),
        backend_(std::move(options.backend)),
        encoder_(std::move(options.model), *backend_),
        refused_(std::move(options.refused)),
        counters_(std::move(options.counters)),
        cache_(options.cache_bytes),
        scheduler_(std::move(scheduler)),
        detokenizer_(std::move(detokenizer)) {}

  behavior_type make_behavior() override {
    return {
        [this](VisionRequest& r) { encode(r); },
    };
  }

  void on_exit() override {
    scheduler_ = nullptr;
    detokenizer_ = nullptr;
  }

 private:
  void encode(VisionRequest& r) {
    const int64_t n_embd = encoder_.model().config().text_embd;
    for (PromptImage& im : r.request.images) {
      try {
        const ImageKey key = ImageKey::of(im.bytes);
        im.digest = key.digest;
        im.features = cache_.find(key);
        if (im.features) {
          if (counters_) counters_->cache_hits.fetch_add(1, std::memory_order_relaxed);
        } else {
          const auto* data = reinterpret_cast<const uint8_t*>(im.bytes.data());
          const std::vector<float> features = encoder_.encode_image({data, im.bytes.size()});
          im.features = make_tensor(im.n_tokens, n_embd);
          std::copy(features.begin(), features.end(), im.features->data);
          cache_.insert(key, im.features);
          if (counters_) counters_->encoded.fetch_add(1, std::memory_order_relaxed);
        }
        im.bytes = std::string();  // the features stand for them now
      } catch (const Error& e) {
        // An unreadable image is the client's; a failing tower is ours.
        const bool client =
            e.code() == Errc::invalid_argument || e.code() == Errc::bad_format || e.code() == Errc::unsupported;
        refuse(r.request.id, client ? Errc::invalid_argument : e.code(),
               client ? "cannot read the image: " + reason_of(e) : e.what(), client ? im.param : "");
        return;
      } catch (const std::exception& e) {
        refuse(r.request.id, Errc::internal, e.what(), {});
        return;
      }
    }
    // The detokenizer has the PromptEvent before anything the scheduler
    // sends about this request: this enqueue comes first.
    send(detokenizer_, std::move(r.event));
    send(scheduler_, std::move(r.request));
  }

  void refuse(RequestId id, Errc code, const std::string& what, std::string param) {
    send(detokenizer_, refusal(id, code, what, std::move(param), refused_.get()));
  }

  // Declared before the encoder: its destructor returns its memory to the backend.
  std::shared_ptr<Backend> backend_;
  vision::VisionEncoder encoder_;
  std::shared_ptr<std::atomic<uint64_t>> refused_;
  std::shared_ptr<VisionCounters> counters_;
  ImageFeatureCache cache_;
  scheduler_actor scheduler_;
  detokenizer_actor detokenizer_;
};

}  // namespace

vision_actor spawn_vision(caf::actor_system& system, VisionActorOptions options, scheduler_actor scheduler,
                          detokenizer_actor detokenizer) {
  std::shared_ptr<ActorMeter> meter = std::move(options.meter);
  if (meter) {
    return system.spawn<Metered<VisionImpl>, caf::detached>(std::move(meter), std::move(options), std::move(scheduler),
                                                            std::move(detokenizer));
  }
  return system.spawn<VisionImpl, caf::detached>(std::move(options), std::move(scheduler), std::move(detokenizer));
}

}  // namespace troupe
