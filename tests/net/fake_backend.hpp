// A scripted Backend for the routes and WebSocket tests: the stories260K
// tokenizer, a small context, and requests that play a script (token texts,
// then a final event) on their own thread, or hold until cancelled. Also a
// ReplyWriter and a WsOutput that record what the server would send.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/model.hpp"
#include "net/backend.hpp"
#include "net/http_types.hpp"
#include "net/ws_protocol.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe::test {

inline const std::shared_ptr<const Model>& net_stories_model() {
  static const std::shared_ptr<const Model> model =
      Model::load(std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf");
  return model;
}

struct Script {
  std::vector<std::string> texts;  // one token event each
  EndReason reason = EndReason::stop;
  Errc error_code = Errc::internal;
  std::string error_message;
  bool hold = false;  // after the texts, wait until cancelled
};

class FakeBackend : public net::Backend {
 public:
  FakeBackend() : tokenizer_(Tokenizer::create(net_stories_model()->vocab())) {}
  ~FakeBackend() override { drain(); }

  // Cancels whatever holds and waits for every request's thread: call it
  // before the ServerCore that the callbacks reach goes away.
  void drain() {
    {
      std::lock_guard lock(mutex_);
      drained_ = true;
    }
    cv_.notify_all();
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

  net::LoadState load_state() const override {
    return ready ? net::LoadState{.ready = true, .loaded = true, .progress = 1, .stage = "ready"}
                 : net::LoadState{.progress = 0.5, .stage = "reading"};
  }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  net::ModelInfo model_info() const override {
    return {
        .id = "fake", .context_length = context_length, .created = 1700000000, .bos_text = "<s>", .eos_text = "</s>"};
  }
  net::MemoryPools memory_pools() const override {
    return {.weight_bytes = 1000, .kv_bytes = 2000, .kv_block_size = 16};
  }

  RequestId submit(std::vector<int32_t> prompt, GenerateParams params, RequestCallbacks cb) override {
    std::lock_guard lock(mutex_);
    const RequestId id = next_id_++;
    submitted.push_back({id, prompt, params});
    const Script s = script;
    threads_.emplace_back([this, id, s, cb = std::move(cb), n_prompt = static_cast<int32_t>(prompt.size())] {
      int32_t i = 0;
      for (const std::string& t : s.texts) {
        cb.on_token(TokenEvent{.id = id, .index = i, .token = 100 + i, .text = t, .logprob = -0.5f});
        ++i;
      }
      if (s.hold) {
        std::unique_lock l(mutex_);
        cv_.wait(l, [&] { return drained_ || cancelled_ids.count(id) != 0; });
      }
      const bool was_cancelled = is_cancelled(id);
      cb.on_final(FinalEvent{.id = id,
                             .reason = was_cancelled ? EndReason::cancelled : s.reason,
                             .error_code = was_cancelled ? Errc::cancelled : s.error_code,
                             .error_message = s.error_message,
                             .prompt_tokens = n_prompt,
                             .completion_tokens = i,
                             .queue_seconds = 0.001,
                             .first_token_seconds = i > 0 ? 0.002 : 0.0,
                             .total_seconds = 0.01});
    });
    return id;
  }

  void cancel(RequestId id) override {
    {
      std::lock_guard lock(mutex_);
      cancelled_ids[id] = true;
    }
    cv_.notify_all();
  }

  PipelineStats stats() const override {
    return PipelineStats{.kv_blocks_total = 100, .kv_blocks_used = 10, .kv_blocks_free = 90, .running = 1};
  }

  bool is_cancelled(RequestId id) {
    std::lock_guard lock(mutex_);
    return cancelled_ids.count(id) != 0;
  }

  struct Submitted {
    RequestId id;
    std::vector<int32_t> prompt;
    GenerateParams params;
  };

  std::atomic<bool> ready{true};
  int32_t context_length = 64;
  Script script;
  std::vector<Submitted> submitted;
  std::map<RequestId, bool> cancelled_ids;

 private:
  std::unique_ptr<Tokenizer> tokenizer_;
  std::mutex mutex_;
  std::condition_variable cv_;
  RequestId next_id_ = 1;
  bool drained_ = false;
  std::vector<std::thread> threads_;
};

// Records what a session would write; can refuse chunks (a slow client).
class RecordingWriter : public net::ReplyWriter {
 public:
  void send(net::HttpReply r) override {
    std::lock_guard lock(mutex_);
    reply = std::move(r);
    finish();
  }
  bool send_head(const net::HttpReply& h) override {
    std::lock_guard lock(mutex_);
    head = h;
    return true;
  }
  bool send_chunk(std::string data) override {
    std::lock_guard lock(mutex_);
    if (refuse_chunks) return false;
    chunks.push_back(std::move(data));
    return true;
  }
  void end() override {
    std::lock_guard lock(mutex_);
    ended = true;
    finish();
  }
  // Waits for send() or end().
  bool wait(std::chrono::seconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return done_; });
  }

  bool refuse_chunks = false;
  net::HttpReply reply;
  std::optional<net::HttpReply> head;
  std::vector<std::string> chunks;
  bool ended = false;

 private:
  void finish() {
    done_ = true;
    cv_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
};

class RecordingWsOutput : public net::WsOutput {
 public:
  bool send_text(std::string frame) override {
    std::lock_guard lock(mutex_);
    frames.push_back(std::move(frame));
    cv_.notify_all();
    return true;
  }
  // Waits until `pred(frames)` holds.
  template <class Pred>
  bool wait_for(Pred pred, std::chrono::seconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, timeout, [&] { return pred(frames); });
  }
  std::vector<std::string> snapshot() {
    std::lock_guard lock(mutex_);
    return frames;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::string> frames;
};

}  // namespace troupe::test
