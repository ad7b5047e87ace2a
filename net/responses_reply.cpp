// ResponsesReply: a JobListener writing a Response or its events. Items
// open as the output turns from reasoning to text; function_call items come
// whole at the end, once the calls are parsed. The stream's head goes with
// response.created, sent with the first text, so a request the engine
// refuses before producing anything still gets its status.
#include "net/responses_reply.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <ctime>

#include "net/answer_stream.hpp"
#include "net/api_error.hpp"
#include "net/chat_answer.hpp"
#include "net/job_reply.hpp"
#include "net/routes.hpp"

namespace troupe::net {
namespace {

namespace json = boost::json;

enum class Item { none, reasoning, message };

json::object text_part(Item kind, std::string_view text) {
  if (kind == Item::reasoning) return {{"type", "reasoning_text"}, {"text", text}};
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}

// An output item; content: its one text part, or none yet.
json::object item_json(Item kind, const std::string& id, const char* status, const json::array& content) {
  if (kind == Item::reasoning) {
    return {{"id", id}, {"type", "reasoning"}, {"summary", json::array()}, {"content", content}, {"status", status}};
  }
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", content}};
}

json::object call_item(const OutputToolCall& c, const std::string& id, const char* status, bool with_arguments) {
  return {{"id", id},         {"type", "function_call"},
          {"status", status}, {"arguments", with_arguments ? c.call.arguments : std::string()},
          {"call_id", c.id},  {"name", c.call.name}};
}

class ResponsesReply : public JobReply {
 public:
  ResponsesReply(ServerCore& core, JobSpec spec, bool stream, std::string echo_json)
      : JobReply(core, std::move(spec)),
        stream_(stream),
        echo_(json::parse(echo_json).as_object()),
        id_(new_response_id("resp_")),
        created_(static_cast<int64_t>(std::time(nullptr))),
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
      const auto whole = [&](const ApiError& e) { return core_.error_reply(e); };
      if (stream_error(f, stream_, head_sent_, whole)) {
        send(json::object{{"type", "error"},
                          {"code", error_->code()},
                          {"message", error_->what()},
                          {"param", error_->param().empty() ? json::value(nullptr) : json::value(error_->param())}});
      }
      return false;
    }
    const bool cut = f.reason == EndReason::length;
    if (!stream_) {
      text_ += text;
      ChatAnswer a = read_chat_answer(spec_.answer, text_, f.reason);
      if (!a.reasoning.empty()) {
        items_.push_back(
            item_json(Item::reasoning, new_response_id("rs_"), "completed", {text_part(Item::reasoning, a.reasoning)}));
      }
      if (!a.content.empty() || a.tool_calls.empty()) {
        items_.push_back(item_json(Item::message, new_response_id("msg_"), cut ? "incomplete" : "completed",
                                   {text_part(Item::message, a.content)}));
      }
      for (const OutputToolCall& c : a.tool_calls) {
        items_.push_back(call_item(c, new_response_id("fc_"), "completed", true));
      }
      return true;
    }
    if (failed_) return false;
    std::vector<grammar::ToolCall> calls;
    if (!emit(answer_.finish(text, calls))) return false;
    std::vector<OutputToolCall> outputs;
    take_tool_calls(std::move(calls), f.reason, outputs);
    if (!start_response() || !close_item(cut)) return false;
    for (const OutputToolCall& c : outputs) {
      const auto index = static_cast<int64_t>(items_.size());
      const std::string id = new_response_id("fc_");
      json::object done = call_item(c, id, "completed", true);
      const bool sent =
          send(json::object{{"type", "response.output_item.added"},
                            {"output_index", index},
                            {"item", call_item(c, id, "in_progress", false)}}) &&
          send(json::object{{"type", "response.function_call_arguments.delta"},
                            {"item_id", id},
                            {"output_index", index},
                            {"delta", c.call.arguments}}) &&
          send(json::object{{"type", "response.function_call_arguments.done"},
                            {"item_id", id},
                            {"output_index", index},
                            {"name", c.call.name},
                            {"arguments", c.call.arguments}}) &&
          send(json::object{{"type", "response.output_item.done"}, {"output_index", index}, {"item", done}});
      if (!sent) return false;
      items_.push_back(std::move(done));
    }
    return true;
  }

  void on_job_end(int32_t prompt_tokens) override {
    if (!stream_) {
      if (error_) {
        writer_->send(core_.error_reply(*error_));
        return;
      }
      writer_->send(HttpReply{.status = 200, .body = json::serialize(response(prompt_tokens))});
      return;
    }
    if (failed_) return;
    if (!error_ && start_response()) {
      const bool cut = final_.reason == EndReason::length;
      send(json::object{{"type", cut ? "response.incomplete" : "response.completed"},
                        {"response", response(prompt_tokens)}});
    }
    writer_->end();
  }

 private:
  // The Response: status, output, usage (null while in progress), and what
  // it repeats of the request.
  json::object response(int32_t prompt_tokens, bool in_progress = false) const {
    const bool cut = final_.reason == EndReason::length;
    json::object r{
        {"id", id_},
        {"object", "response"},
        {"created_at", created_},
        {"status", in_progress ? "in_progress"
                   : cut       ? "incomplete"
                               : "completed"},
        {"error", nullptr},
        {"incomplete_details",
         !in_progress && cut ? json::value(json::object{{"reason", "max_output_tokens"}}) : json::value(nullptr)},
        {"model", spec_.meta.model},
        {"output", in_progress ? json::array() : items_}};
    if (in_progress) {
      r["usage"] = nullptr;
    } else {
      const int32_t out = final_.completion_tokens;
      r["usage"] = json::object{{"input_tokens", prompt_tokens},
                                {"input_tokens_details", json::object{{"cached_tokens", 0}, {"cache_write_tokens", 0}}},
                                {"output_tokens", out},
                                {"output_tokens_details", json::object{{"reasoning_tokens", 0}}},
                                {"total_tokens", prompt_tokens + out}};
    }
    for (const auto& kv : echo_) r[kv.key()] = kv.value();
    return r;
  }

  bool send(json::object event) {
    event["sequence_number"] = sequence_++;
    const std::string type(event.at("type").as_string());
    return writer_->send_chunk("event: " + type + "\ndata: " + json::serialize(event) + "\n\n");
  }

  // response.created and response.in_progress, once.
  bool start_response() {
    if (head_sent_) return true;
    head_sent_ = true;
    writer_->send_head(HttpReply{.status = 200,
                                 .content_type = "text/event-stream; charset=utf-8",
                                 .headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}}});
    return send(json::object{{"type", "response.created"}, {"response", response(0, true)}}) &&
           send(json::object{{"type", "response.in_progress"}, {"response", response(0, true)}});
  }

  bool emit(const ReasoningParts& parts) {
    if (parts.reasoning.empty() && parts.content.empty()) return true;
    if (!start_response()) return false;
    return (parts.reasoning.empty() || delta(Item::reasoning, parts.reasoning)) &&
           (parts.content.empty() || delta(Item::message, parts.content));
  }

  bool delta(Item kind, std::string_view text) {
    if (!open_item(kind)) return false;
    item_text_ += text;
    json::object d{{"type", kind == Item::reasoning ? "response.reasoning_text.delta" : "response.output_text.delta"},
                   {"item_id", item_id_},
                   {"output_index", items_.size()},
                   {"content_index", 0},
                   {"delta", text}};
    if (kind == Item::message) d["logprobs"] = json::array();
    return send(std::move(d));
  }

  bool open_item(Item kind) {
    if (item_ == kind) return true;
    if (!close_item(false)) return false;
    item_ = kind;
    item_id_ = new_response_id(kind == Item::reasoning ? "rs_" : "msg_");
    item_text_.clear();
    const auto index = static_cast<int64_t>(items_.size());
    return send(json::object{{"type", "response.output_item.added"},
                             {"output_index", index},
                             {"item", item_json(kind, item_id_, "in_progress", {})}}) &&
           send(json::object{{"type", "response.content_part.added"},
                             {"item_id", item_id_},
                             {"output_index", index},
                             {"content_index", 0},
                             {"part", text_part(kind, "")}});
  }

  // The open item's .done events; cut: the output ended at max_output_tokens.
  bool close_item(bool cut) {
    if (item_ == Item::none) return true;
    const Item kind = item_;
    item_ = Item::none;
    const auto index = static_cast<int64_t>(items_.size());
    json::object done{{"type", kind == Item::reasoning ? "response.reasoning_text.done" : "response.output_text.done"},
                      {"item_id", item_id_},
                      {"output_index", index},
                      {"content_index", 0},
                      {"text", item_text_}};
    if (kind == Item::message) done["logprobs"] = json::array();
    json::object item = item_json(kind, item_id_, kind == Item::message && cut ? "incomplete" : "completed",
                                  {text_part(kind, item_text_)});
    const bool sent =
        send(std::move(done)) &&
        send(json::object{{"type", "response.content_part.done"},
                          {"item_id", item_id_},
                          {"output_index", index},
                          {"content_index", 0},
                          {"part", text_part(kind, item_text_)}}) &&
        send(json::object{{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}});
    items_.push_back(std::move(item));
    return sent;
  }

  const bool stream_;
  const json::object echo_;
  const std::string id_;  // resp_...
  const int64_t created_;
  // Touched only from the job's serialised listener calls.
  AnswerStream answer_;
  std::string text_;        // not streamed: the whole output
  json::array items_;       // the output items finished so far
  Item item_ = Item::none;  // streamed: the item being written
  std::string item_id_;
  std::string item_text_;
  int64_t sequence_ = 0;
  FinalEvent final_;
  bool head_sent_ = false;
};

}  // namespace

std::shared_ptr<AsyncReply> make_responses_reply(ServerCore& core, JobSpec spec, bool stream, std::string echo_json) {
  return std::make_shared<ResponsesReply>(core, std::move(spec), stream, std::move(echo_json));
}

}  // namespace troupe::net
