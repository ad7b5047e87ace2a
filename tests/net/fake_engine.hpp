// A scripted EngineClient for the routes and WebSocket tests: the engine's own
// front door (PromptReader over the stories260K tokenizer, a small context),
// and requests that play a script (token texts, then a final event) on their
// own thread, or hold until cancelled. Also a
// ReplyWriter and a WsOutput that record what the server would send.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/prompt_reader.hpp"
#include "model/model.hpp"
#include "net/engine_client.hpp"
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
  bool hold = false;        // after the texts, wait until cancelled
  std::string stop_string;  // the stop string that ended it (reason stop)
};

class FakeEngine : public net::EngineClient {
 public:
  FakeEngine() : tokenizer_(Tokenizer::create(net_stories_model()->vocab())) {}

  // The engine's facts as this fake publishes them.
  ModelInfo info() const {
    return ModelInfo{.name = "fake",
                     .context_length = context_length,
                     .n_vocab = tokenizer_->n_vocab(),
                     .bos = tokenizer_->bos(),
                     .eos = tokenizer_->eos(),
                     .bos_text = "<s>",
                     .eos_text = "</s>",
                     .tool_call_syntax = tool_call_syntax,
                     .reasoning_tags = reasoning_tags,
                     .reasoning_starts_open = reasoning_starts_open,
                     .harmony = harmony};
  }
  ~FakeEngine() override { drain(); }

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
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  net::ServedModel served_model() const override {
    return {.id = "fake",
            .created = 1700000000,
            .engine = info(),
            .architecture = "llama",
            .digest = "0123456789abcdef",
            .lora = lora};
  }
  std::vector<LoraAdapterSpec> lora;  // what served_model() says the model runs with
  net::MemoryPools memory_pools() const override {
    return {.weight_bytes = 1000, .kv_bytes = 2000, .kv_block_size = 16};
  }

  RequestId submit(EngineRequest request, RequestCallbacks cb) override {
    // The front door, as the tokenizer actor runs it (here synchronously, so
    // that `submitted` is known when submit returns); the events come on
    // the request's own thread, as the pipeline's do.
    std::vector<int32_t> prompt;
    std::optional<RequestError> refused;
    try {
      prompt = reader().admit(request);
    } catch (const RequestError& e) {
      refused = e;
    }
    std::lock_guard lock(mutex_);
    const RequestId id = next_id_++;
    if (!refused) submitted.push_back({id, prompt, request.params});
    const Script s = script;
    threads_.emplace_back([this, id, s, cb = std::move(cb), refused, prompt = std::move(prompt),
                           return_prompt = request.return_prompt] {
      if (refused) {
        cb.on_final(FinalEvent{.id = id,
                               .reason = EndReason::error,
                               .error_code = refused->code(),
                               .error_message = refused->what(),
                               .error_param = refused->param()});
        return;
      }
      const auto n_prompt = static_cast<int32_t>(prompt.size());
      PromptEvent pe{.id = id, .n_tokens = n_prompt};
      if (return_prompt) {
        pe.tokens = prompt;
        pe.text = reader().text_of(prompt);
      }
      if (cb.on_prompt) cb.on_prompt(pe);
      int32_t i = 0;
      for (const std::string& t : s.texts) {
        cb.on_token(TokenEvent{.id = id, .index = i, .token = 100 + i, .text = t, .logprob = -0.5f,
                               .bytes = tokenizer_->token_to_bytes(100 + i, true)});
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
                             .stop_string = was_cancelled ? std::string() : s.stop_string,
                             .prompt_tokens = n_prompt,
                             .completion_tokens = i,
                             .queue_seconds = 0.001,
                             .first_token_seconds = i > 0 ? 0.002 : 0.0,
                             .total_seconds = 0.01});
    });
    return id;
  }

  void tokenize(EngineRequest request, bool detokenize, std::function<void(TokenizeAnswer)> done) override {
    done(reader().tokenize(std::move(request), detokenize));
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
  std::atomic<int32_t> context_length{64};
  grammar::ToolCallSyntax tool_call_syntax = grammar::ToolCallSyntax::json;
  bool reasoning_tags = false;
  bool reasoning_starts_open = false;
  bool harmony = false;
  Script script;
  std::vector<Submitted> submitted;
  std::map<RequestId, bool> cancelled_ids;

 private:
  const PromptReader& reader() {
    std::lock_guard lock(reader_mutex_);
    // Rebuilt when a test changes the context or the template (the engine
    // publishes its facts once; the fake lets tests vary them).
    if (!reader_ || reader_->model().context_length != context_length || reader_template_ != chat_template) {
      reader_template_ = chat_template;
      reader_ = std::make_unique<PromptReader>(
          std::shared_ptr<const Tokenizer>(tokenizer_.get(), [](const Tokenizer*) {}),
          std::make_shared<const ChatPrompter>(chat_template, "", "<s>", "</s>"), info());
    }
    return *reader_;
  }

 public:
  std::string chat_template;  // the deployment's override; empty: the built-in one

 private:
  std::unique_ptr<Tokenizer> tokenizer_;
  std::mutex reader_mutex_;
  std::unique_ptr<PromptReader> reader_;
  std::string reader_template_;  // the chat_template reader_ renders
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
    // The transport writes a chunk only after the head it belongs to.
    EXPECT_TRUE(head.has_value()) << "a chunk before the head: " << data;
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
