// AnthropicReply: a JobListener writing a Message or its events. The
// stream's head goes with message_start, sent with the first text, so a
// request the engine refuses before producing anything still gets its
// status. Blocks open as the output turns from thinking to text; tool_use
// blocks come whole at the end, once the calls are parsed.
#include "net/anthropic_reply.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include "net/answer_stream.hpp"
#include "net/chat_answer.hpp"
#include "net/job_reply.hpp"
#include "net/routes.hpp"

namespace troupe::net {
namespace {

namespace json = boost::json;

const char* error_type(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return "api_error";
  }
}

std::string stop_reason(const FinalEvent& f, bool calls) {
  if (f.reason == EndReason::length) return "max_tokens";
  if (calls) return "tool_use";
  return f.stop_string.empty() ? "end_turn" : "stop_sequence";
}

json::value stop_sequence(const FinalEvent& f) {
  if (f.reason == EndReason::length || f.stop_string.empty()) return nullptr;
  return json::string(f.stop_string);
}

json::object tool_use_block(const OutputToolCall& c, bool streamed) {
  // Streamed, the input comes as input_json_delta; whole, as the object.
  return {{"type", "tool_use"},
          {"id", c.id},
          {"name", c.call.name},
          {"input", streamed ? json::object() : tool_arguments_object(c.call.arguments)}};
}

std::string sse(const json::object& event) {
  return "event: " + std::string(event.at("type").as_string()) + "\ndata: " + json::serialize(event) + "\n\n";
}

class AnthropicReply : public JobReply {
 public:
  AnthropicReply(ServerCore& core, JobSpec spec, bool stream, std::string model)
      : JobReply(core, std::move(spec)),
        stream_(stream),
        model_(std::move(model)),
        id_(new_response_id("msg_")),
        answer_(spec_.answer) {}

  bool on_token(int32_t, const TokenEvent&, std::string_view text, const std::vector<TokenLogprobs>*) override {
    if (!stream_) {
      text_ += text;
      return true;
    }
    if (failed_) return false;
    return emit(answer_.push(text));
  }

  bool on_choice_end(int32_t, const FinalEvent& f, std::string_view text) override {
    final_ = f;
    if (f.reason == EndReason::error || f.reason == EndReason::cancelled) {
      const auto whole = [&](const ApiError& e) { return anthropic_error_reply(core_.error_reply(e), e); };
      if (stream_error(f, stream_, head_sent_, whole)) {
        writer_->send_chunk("event: error\ndata: " + anthropic_error_body(*error_) + "\n\n");
      }
      return false;
    }
    if (!stream_) {
      text_ += text;
      ChatAnswer a = read_chat_answer(spec_.answer, text_, f.reason);
      reasoning_ = std::move(a.reasoning);
      text_ = std::move(a.content);
      tool_calls_ = std::move(a.tool_calls);
      return true;
    }
    if (failed_) return false;
    std::vector<grammar::ToolCall> calls;
    if (!emit(answer_.finish(text, calls))) return false;
    take_tool_calls(std::move(calls), f.reason, tool_calls_);
    // A reply that is all calls has sent nothing yet.
    if (!tool_calls_.empty() && !start_message()) return false;
    if (!close_block()) return false;
    for (const OutputToolCall& c : tool_calls_) {
      ++index_;
      const bool sent =
          send(json::object{
              {"type", "content_block_start"}, {"index", index_}, {"content_block", tool_use_block(c, true)}}) &&
          send(json::object{
              {"type", "content_block_delta"},
              {"index", index_},
              {"delta", json::object{{"type", "input_json_delta"},
                                     {"partial_json", json::serialize(tool_arguments_object(c.call.arguments))}}}}) &&
          send(json::object{{"type", "content_block_stop"}, {"index", index_}});
      if (!sent) return false;
    }
    return true;
  }

  void on_job_end(int32_t prompt_tokens) override {
    const bool calls = !tool_calls_.empty();
    if (!stream_) {
      if (error_) {
        writer_->send(anthropic_error_reply(core_.error_reply(*error_), *error_));
        return;
      }
      json::array content;
      if (!reasoning_.empty()) {
        content.push_back(json::object{{"type", "thinking"}, {"thinking", reasoning_}, {"signature", ""}});
      }
      if (!text_.empty() || (!calls && reasoning_.empty()))
        content.push_back(json::object{{"type", "text"}, {"text", text_}});
      for (const OutputToolCall& c : tool_calls_) content.push_back(tool_use_block(c, false));
      json::object body = message(std::move(content), prompt_tokens, final_.completion_tokens);
      body["stop_reason"] = stop_reason(final_, calls);
      body["stop_sequence"] = stop_sequence(final_);
      writer_->send(HttpReply{.status = 200, .body = json::serialize(body)});
      return;
    }
    if (failed_) return;
    if (!error_) {
      start_message();
      send(json::object{
          {"type", "message_delta"},
          {"delta",
           json::object{{"stop_reason", stop_reason(final_, calls)}, {"stop_sequence", stop_sequence(final_)}}},
          {"usage", json::object{{"input_tokens", prompt_tokens}, {"output_tokens", final_.completion_tokens}}}});
      send(json::object{{"type", "message_stop"}});
    }
    writer_->end();
  }

 private:
  enum class Block { none, thinking, text };

  json::object message(json::array content, int32_t input_tokens, int32_t output_tokens) const {
    return {{"id", id_},
            {"type", "message"},
            {"role", "assistant"},
            {"model", model_},
            {"content", std::move(content)},
            {"stop_reason", nullptr},
            {"stop_sequence", nullptr},
            {"usage", json::object{{"input_tokens", input_tokens}, {"output_tokens", output_tokens}}}};
  }

  // message_start, once: the input's count comes with message_delta (the
  // listener learns it at the end).
  bool start_message() {
    if (head_sent_) return true;
    head_sent_ = true;
    writer_->send_head(HttpReply{.status = 200,
                                 .content_type = "text/event-stream; charset=utf-8",
                                 .headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}}});
    return send(json::object{{"type", "message_start"}, {"message", message({}, 0, 0)}});
  }

  bool send(const json::object& event) { return writer_->send_chunk(sse(event)); }

  // What is decided of the output: thinking_delta and text_delta events,
  // each in its block (a new block when the output turns).
  bool emit(const ReasoningParts& parts) {
    if (parts.reasoning.empty() && parts.content.empty()) return true;
    if (!start_message()) return false;
    if (!parts.reasoning.empty() &&
        !(open_block(Block::thinking) &&
          send(json::object{{"type", "content_block_delta"},
                            {"index", index_},
                            {"delta", json::object{{"type", "thinking_delta"}, {"thinking", parts.reasoning}}}}))) {
      return false;
    }
    if (!parts.content.empty() &&
        !(open_block(Block::text) &&
          send(json::object{{"type", "content_block_delta"},
                            {"index", index_},
                            {"delta", json::object{{"type", "text_delta"}, {"text", parts.content}}}}))) {
      return false;
    }
    return true;
  }

  bool open_block(Block b) {
    if (block_ == b) return true;
    if (!close_block()) return false;
    ++index_;
    block_ = b;
    const json::object start = b == Block::thinking
                                   ? json::object{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                   : json::object{{"type", "text"}, {"text", ""}};
    return send(json::object{{"type", "content_block_start"}, {"index", index_}, {"content_block", start}});
  }

  // A thinking block ends with its signature: empty, since no server signs
  // a local model's reasoning (a client sends it back as it came).
  bool close_block() {
    if (block_ == Block::none) return true;
    if (block_ == Block::thinking &&
        !send(json::object{{"type", "content_block_delta"},
                           {"index", index_},
                           {"delta", json::object{{"type", "signature_delta"}, {"signature", ""}}}})) {
      return false;
    }
    block_ = Block::none;
    return send(json::object{{"type", "content_block_stop"}, {"index", index_}});
  }

  const bool stream_;
  const std::string model_;
  const std::string id_;  // msg_...
  // Touched only from the job's serialised listener calls.
  AnswerStream answer_;
  std::string text_;       // not streamed: the whole output, then its answer
  std::string reasoning_;  // not streamed: the reasoning read out of it
  std::vector<OutputToolCall> tool_calls_;
  FinalEvent final_;
  Block block_ = Block::none;
  int64_t index_ = -1;  // the block being written
  bool head_sent_ = false;
};

class CountTokensReply : public AsyncReply {
 public:
  CountTokensReply(ServerCore& core, ChatPrompt chat) : core_(core), chat_(std::move(chat)) {}

  void start(std::shared_ptr<ReplyWriter> writer) override {
    ServerCore* core = &core_;
    auto refuse = [writer, core](const ApiError& e) { writer->send(anthropic_error_reply(core->error_reply(e), e)); };
    try {
      core_.backend().tokenize(
          EngineRequest::from_chat(std::move(chat_)), /*detokenize=*/false, [writer, refuse](TokenizeAnswer a) {
            if (!a.error.empty()) return refuse(api_error_from(a.error_code, a.error, a.error_param));
            writer->send(
                HttpReply{.status = 200, .body = json::serialize(json::object{{"input_tokens", a.tokens.size()}})});
          });
    } catch (const Error& e) {
      refuse(api_error_from(e.code(), e.what()));
    }
  }

  void cancel() override {}  // a count is short: it finishes and is dropped

 private:
  ServerCore& core_;
  ChatPrompt chat_;
};

}  // namespace

std::shared_ptr<AsyncReply> make_anthropic_reply(ServerCore& core, JobSpec spec, bool stream, std::string model) {
  return std::make_shared<AnthropicReply>(core, std::move(spec), stream, std::move(model));
}

std::shared_ptr<AsyncReply> make_anthropic_count_reply(ServerCore& core, ChatPrompt chat) {
  return std::make_shared<CountTokensReply>(core, std::move(chat));
}

std::string anthropic_error_body(const ApiError& e) {
  return json::serialize(json::object{
      {"type", "error"}, {"error", json::object{{"type", error_type(e.status())}, {"message", e.what()}}}});
}

HttpReply anthropic_error_reply(HttpReply counted, const ApiError& e) {
  counted.body = anthropic_error_body(e);
  return counted;
}

}  // namespace troupe::net
