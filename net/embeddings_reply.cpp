#include "net/embeddings_reply.hpp"

#include <algorithm>
#include <bit>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>

#include "net/api_error.hpp"
#include "net/routes.hpp"

namespace troupe::net {
namespace {

class EmbeddingsReply : public AsyncReply, public std::enable_shared_from_this<EmbeddingsReply> {
 public:
  EmbeddingsReply(ServerCore& core, EmbeddingsRequest request, std::string model_id, int32_t slots)
      : core_(core),
        request_(std::move(request)),
        model_id_(std::move(model_id)),
        slots_(slots),
        vectors_(request_.size()),
        ids_(request_.size(), -1),
        start_(std::chrono::steady_clock::now()) {}

  void start(std::shared_ptr<ReplyWriter> writer) override {
    std::lock_guard lock(mutex_);
    writer_ = std::move(writer);
    while (next_ < request_.size() && running_ < slots_ && !ended_) submit_locked();
  }

  void cancel() override {
    std::lock_guard lock(mutex_);
    end_locked();
  }

 private:
  EngineRequest engine_request(size_t i) const {
    EngineRequest r;
    if (!request_.texts.empty()) {
      r = EngineRequest::from_text({.text = request_.texts[i], .add_special = request_.add_special_tokens});
    } else {
      r = EngineRequest::from_tokens(request_.token_lists[i]);
    }
    r.prompt_field = request_.size() > 1 ? "input[" + std::to_string(i) + "]" : "input";
    r.params.embed = {.on = true,
                      .normalize = request_.normalize,
                      .dimensions = request_.dimensions,
                      .truncate = request_.truncate};
    return r;
  }

  // The callbacks run on actor threads, after submit returns (they take
  // the lock submit holds).
  void submit_locked() {
    const size_t i = next_++;
    ++running_;
    std::weak_ptr<EmbeddingsReply> self = weak_from_this();
    RequestCallbacks cb{.on_token = {}, .on_final = [self, i](const FinalEvent& f) {
                          if (auto s = self.lock()) s->on_final(i, f);
                        }};
    try {
      ids_[i] = core_.backend().submit(engine_request(i), std::move(cb));
    } catch (const Error& e) {
      fail_locked(api_error_from(e.code(), e.what()));
    }
  }

  void on_final(size_t i, const FinalEvent& f) {
    std::lock_guard lock(mutex_);
    ids_[i] = -1;
    --running_;
    // Each input is one of the engine's requests, in /metrics as any other.
    core_.metrics().request_started("embeddings", f.prompt_tokens);
    core_.metrics().request_ended(f);
    if (ended_) return;
    if (f.reason != EndReason::stop || f.embedding.empty()) {
      const bool cancelled = f.reason == EndReason::cancelled;
      fail_locked(f.reason == EndReason::error || cancelled
                      ? api_error_from(cancelled ? Errc::unavailable : f.error_code, f.error_message, f.error_param)
                      : ApiError(500, "the engine ended input " + std::to_string(i) + " without its embedding", {},
                                 "internal_error"));
      return;
    }
    if (!std::all_of(f.embedding.begin(), f.embedding.end(), [](float x) { return std::isfinite(x); })) {
      fail_locked(ApiError(500, "the model's embedding of input " + std::to_string(i) + " is not finite", {},
                           "internal_error"));
      return;
    }
    vectors_[i] = f.embedding;
    prompt_tokens_ += f.prompt_tokens;
    ++n_done_;
    if (n_done_ == vectors_.size()) {
      writer_->send(HttpReply{.status = 200,
                              .content_type = "application/json",
                              .body = embeddings_body(vectors_, request_.base64, model_id_, prompt_tokens_)});
      end_locked();
      return;
    }
    while (next_ < request_.size() && running_ < slots_ && !ended_) submit_locked();
  }

  void fail_locked(const ApiError& e) {
    if (ended_) return;
    writer_->send(core_.error_reply(e));
    end_locked();
  }

  // Cancels what still runs and gives the admission slots back, once.
  void end_locked() {
    if (ended_) return;
    ended_ = true;
    for (const RequestId id : ids_) {
      if (id >= 0) core_.backend().cancel(id);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    for (int32_t k = 0; k < slots_; ++k) core_.admission().release(seconds);
  }

  ServerCore& core_;
  const EmbeddingsRequest request_;
  const std::string model_id_;
  const int32_t slots_;
  std::mutex mutex_;
  std::shared_ptr<ReplyWriter> writer_;
  std::vector<std::vector<float>> vectors_;  // [n_inputs][dims]
  std::vector<RequestId> ids_;               // [n_inputs] the engine's id while it runs, else -1
  size_t next_ = 0;                          // the next input to submit
  size_t n_done_ = 0;
  int32_t running_ = 0;
  int64_t prompt_tokens_ = 0;
  bool ended_ = false;
  const std::chrono::steady_clock::time_point start_;
};

void append_float(std::string& out, float x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  out.append(buf, r.ptr);
}

}  // namespace

std::shared_ptr<AsyncReply> make_embeddings_reply(ServerCore& core, EmbeddingsRequest request, std::string model_id,
                                                  int32_t slots) {
  return std::make_shared<EmbeddingsReply>(core, std::move(request), std::move(model_id), slots);
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 | static_cast<uint8_t>(bytes[i + 1]) << 8 |
                       static_cast<uint8_t>(bytes[i + 2]);
    for (const int shift : {18, 12, 6, 0}) out.push_back(kAlphabet[(v >> shift) & 63]);
  }
  if (const size_t rest = bytes.size() - i; rest > 0) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    out.push_back(kAlphabet[(v >> 18) & 63]);
    out.push_back(kAlphabet[(v >> 12) & 63]);
    out.push_back(rest == 2 ? kAlphabet[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string embeddings_body(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model_id,
                            int64_t prompt_tokens) {
  static_assert(std::endian::native == std::endian::little, "base64 vectors are little-endian float32");
  std::string out = R"({"object":"list","data":[)";
  for (size_t i = 0; i < vectors.size(); ++i) {
    if (i > 0) out += ',';
    out += R"({"object":"embedding","index":)" + std::to_string(i) + R"(,"embedding":)";
    const std::vector<float>& v = vectors[i];
    if (base64) {
      std::string bytes(v.size() * sizeof(float), '\0');
      std::memcpy(bytes.data(), v.data(), bytes.size());
      out += '"' + base64_encode(bytes) + '"';
    } else {
      out += '[';
      for (size_t j = 0; j < v.size(); ++j) {
        if (j > 0) out += ',';
        append_float(out, v[j]);
      }
      out += ']';
    }
    out += '}';
  }
  out += R"(],"model":)" + boost::json::serialize(boost::json::value(model_id)) + R"(,"usage":{"prompt_tokens":)" +
         std::to_string(prompt_tokens) + R"(,"total_tokens":)" + std::to_string(prompt_tokens) + "}}";
  return out;
}

}  // namespace troupe::net
