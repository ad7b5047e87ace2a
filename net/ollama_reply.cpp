// OllamaReply: a JobListener writing Ollama's lines. The stream's head goes
// with its first line, so a request the engine refuses before producing
// anything still gets its status (as the SSE reply does).
#include "net/ollama_reply.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include "net/answer_stream.hpp"
#include "net/api_error.hpp"
#include "net/chat_answer.hpp"
#include "net/job_reply.hpp"
#include "net/ollama_api.hpp"
#include "net/routes.hpp"

namespace troupe::net {
namespace {

namespace json = boost::json;

int64_t nanoseconds(double seconds) { return static_cast<int64_t>(seconds * 1e9); }

json::array byte_values(const std::vector<uint8_t>& bytes) {
  json::array out;
  for (uint8_t b : bytes) out.push_back(b);
  return out;
}

// Ollama's [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}].
void append_logprobs(json::array& out, const std::vector<TokenLogprobs>& lps) {
  for (const TokenLogprobs& lp : lps) {
    json::object entry{
        {"token", lp.chosen.token}, {"logprob", lp.chosen.logprob}, {"bytes", byte_values(lp.chosen.bytes)}};
    json::array top;
    for (const TokenAlternative& alt : lp.top) {
      top.push_back(json::object{{"token", alt.token}, {"logprob", alt.logprob}, {"bytes", byte_values(alt.bytes)}});
    }
    if (!top.empty()) entry["top_logprobs"] = std::move(top);
    out.push_back(std::move(entry));
  }
}

// [{"id", "function": {"index", "name", "arguments": {...}}}]: Ollama's
// calls carry their arguments as an object, not as JSON text.
json::array tool_calls_json(const std::vector<OutputToolCall>& calls) {
  json::array out;
  for (size_t k = 0; k < calls.size(); ++k) {
    out.push_back(
        json::object{{"id", calls[k].id},
                     {"function", json::object{{"index", static_cast<int64_t>(k)},
                                               {"name", calls[k].call.name},
                                               {"arguments", tool_arguments_object(calls[k].call.arguments)}}}});
  }
  return out;
}

class OllamaReply : public JobReply {
 public:
  OllamaReply(ServerCore& core, JobSpec spec, OllamaReplyOptions options)
      : JobReply(core, std::move(spec)), options_(std::move(options)), answer_(spec_.answer) {}

  bool on_token(int32_t, const TokenEvent&, std::string_view text, const std::vector<TokenLogprobs>* lps) override {
    if (!options_.stream) {
      text_ += text;
      if (lps != nullptr) append_logprobs(logprobs_, *lps);
      return true;
    }
    if (failed_) return false;
    const ReasoningParts parts = answer_.push(text);
    if (parts.content.empty() && parts.reasoning.empty() && lps == nullptr) return true;
    json::object line = head_fields();
    put_text(line, parts.content, parts.reasoning, nullptr);
    if (lps != nullptr) {
      json::array lp;
      append_logprobs(lp, *lps);
      line["logprobs"] = std::move(lp);
    }
    line["done"] = false;
    return send_line(line);
  }

  bool on_choice_end(int32_t, const FinalEvent& f, std::string_view text) override {
    final_ = f;
    if (f.reason == EndReason::error || f.reason == EndReason::cancelled) {
      const auto whole = [&](const ApiError& e) { return ollama_error_reply(core_.error_reply(e), e); };
      if (stream_error(f, options_.stream, head_sent_, whole)) send_line(json::object{{"error", error_->what()}});
      return false;
    }
    if (!options_.stream) {
      text_ += text;
      ChatAnswer a = read_chat_answer(spec_.answer, text_, f.reason);
      reasoning_ = std::move(a.reasoning);
      text_ = std::move(a.content);
      tool_calls_ = std::move(a.tool_calls);
      return true;
    }
    if (failed_) return false;
    std::vector<grammar::ToolCall> calls;
    const ReasoningParts parts = answer_.finish(text, calls);
    take_tool_calls(std::move(calls), f.reason, tool_calls_);
    if (parts.content.empty() && parts.reasoning.empty() && tool_calls_.empty()) return true;
    json::object line = head_fields();
    put_text(line, parts.content, parts.reasoning, &tool_calls_);
    line["done"] = false;
    return send_line(line);
  }

  void on_job_end(int32_t prompt_tokens) override {
    if (!options_.stream) {
      if (error_) {
        writer_->send(ollama_error_reply(core_.error_reply(*error_), *error_));
        return;
      }
      json::object body = head_fields();
      put_text(body, text_, reasoning_, &tool_calls_);
      if (options_.logprobs) body["logprobs"] = std::move(logprobs_);
      put_end(body, prompt_tokens);
      writer_->send(HttpReply{.status = 200, .body = json::serialize(body)});
      return;
    }
    if (failed_) return;
    if (!error_) {
      json::object line = head_fields();
      put_text(line, {}, {}, nullptr);
      put_end(line, prompt_tokens);
      send_line(line);
    }
    writer_->end();
  }

 private:
  json::object head_fields() const {
    return json::object{{"model", options_.model}, {"created_at", ollama_timestamp_now()}};
  }

  // Chat: "message": {"role", "content", "thinking"?, "tool_calls"?};
  // generate: "response", "thinking"?.
  void put_text(json::object& o, std::string_view content, std::string_view thinking,
                const std::vector<OutputToolCall>* calls) const {
    if (!options_.chat) {
      o["response"] = content;
      if (!thinking.empty()) o["thinking"] = thinking;
      return;
    }
    json::object message{{"role", "assistant"}, {"content", content}};
    if (!thinking.empty()) message["thinking"] = thinking;
    if (calls != nullptr && !calls->empty()) message["tool_calls"] = tool_calls_json(*calls);
    o["message"] = std::move(message);
  }

  // "done": true and the counters; the durations are the engine's own
  // (prompt_eval: scheduled to first token; eval: first token to the end).
  void put_end(json::object& o, int32_t prompt_tokens) const {
    const auto total = std::chrono::steady_clock::now() - options_.start;
    const double first = final_.first_token_seconds > 0 ? final_.first_token_seconds : final_.total_seconds;
    o["done"] = true;
    o["done_reason"] = final_.reason == EndReason::length ? "length" : "stop";
    o["total_duration"] = std::chrono::duration_cast<std::chrono::nanoseconds>(total).count();
    o["load_duration"] = 0;
    o["prompt_eval_count"] = prompt_tokens;
    o["prompt_eval_duration"] = nanoseconds(std::max(0.0, first - final_.queue_seconds));
    o["eval_count"] = final_.completion_tokens;
    o["eval_duration"] = nanoseconds(std::max(0.0, final_.total_seconds - first));
  }

  bool send_line(const json::object& line) {
    if (!head_sent_) {
      head_sent_ = true;
      writer_->send_head(HttpReply{.status = 200,
                                   .content_type = "application/x-ndjson",
                                   .headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}}});
    }
    return writer_->send_chunk(json::serialize(line) + "\n");
  }

  const OllamaReplyOptions options_;
  // Touched only from the job's serialised listener calls.
  AnswerStream answer_;
  std::string text_;       // not streamed: the whole output, then its answer
  std::string reasoning_;  // not streamed: the reasoning read out of it
  json::array logprobs_;   // not streamed: every token's
  std::vector<OutputToolCall> tool_calls_;
  FinalEvent final_;
  bool head_sent_ = false;
};

}  // namespace

std::shared_ptr<AsyncReply> make_ollama_reply(ServerCore& core, JobSpec spec, OllamaReplyOptions options) {
  return std::make_shared<OllamaReply>(core, std::move(spec), std::move(options));
}

std::string ollama_load_body(bool chat, const std::string& model) {
  json::object o{{"model", model}, {"created_at", ollama_timestamp_now()}};
  if (chat) {
    o["message"] = json::object{{"role", "assistant"}, {"content", ""}};
  } else {
    o["response"] = "";
  }
  o["done"] = true;
  o["done_reason"] = "load";
  return json::serialize(o);
}

}  // namespace troupe::net
