// The harmony reader: a header is held until its <|message|>, which names
// the body's route; a body passes as it comes, up to the marker that ends
// it (or a new header, where the model left out <|end|>).
#include "net/harmony_answer.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace troupe::net {
namespace {

constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kStart = "<|start|>";
// What ends a body: the message's end, a call, the turn's end, or a new
// header the model opened without closing the body.
constexpr std::string_view kBodyEnds[] = {"<|end|>", "<|call|>", "<|return|>", kStart, kChannel};
// A header longer than this without <|message|> is not a header: it is
// passed on as text rather than held without bound.
constexpr size_t kMaxHeader = 1024;

// The word after `key` in a header ("analysis" after "<|channel|>",
// "functions.f" after "to="): up to a space or the next marker.
std::string word_after(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == std::string_view::npos) return {};
  const size_t from = at + key.size();
  size_t end = from;
  while (end < header.size() && header[end] != ' ' && header[end] != '<' && header[end] != '\n') ++end;
  return std::string(header.substr(from, end - from));
}

// Bytes at the end of text that may begin a body's end marker.
size_t partial_marker(std::string_view text) {
  const size_t lt = text.rfind('<');
  if (lt == std::string_view::npos) return 0;
  const std::string_view tail = text.substr(lt);
  for (std::string_view m : kBodyEnds) {
    if (tail.size() < m.size() && m.starts_with(tail)) return tail.size();
  }
  return 0;
}

enum class Opens { no, maybe, yes };

// Whether text begins a header: "<|" or " to=", or a prefix of one (maybe).
Opens opens_header(std::string_view text) {
  for (std::string_view opener : {std::string_view("<|"), std::string_view(" to=")}) {
    if (text.starts_with(opener)) return Opens::yes;
    if (opener.starts_with(text)) return Opens::maybe;
  }
  return Opens::no;
}

std::string_view trim(std::string_view s) {
  const size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string_view::npos) return {};
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

}  // namespace

HarmonyStream::HarmonyStream(std::vector<std::string> names) : names_(std::move(names)) {}

HarmonyParts HarmonyStream::push(std::string_view piece) {
  held_ += piece;
  HarmonyParts out;
  step(out, false);
  return out;
}

HarmonyParts HarmonyStream::finish(std::vector<grammar::ToolCall>& calls) {
  HarmonyParts out;
  step(out, true);
  for (grammar::ToolCall& c : calls_) calls.push_back(std::move(c));
  calls_.clear();
  return out;
}

void HarmonyStream::step(HarmonyParts& out, bool last) {
  for (;;) {
    if (!in_body_) {
      if (held_.empty()) return;
      // Text where a header should be (one opens with "<|", or right after
      // the prompt's "<|start|>assistant" with " to=" naming a recipient):
      // a body of content without one.
      if (opens_header(held_) == Opens::no) {
        in_body_ = true;
        route_ = Route::content;
        continue;
      }
      // Whether a header ends is decided by its first kMaxHeader bytes, so
      // a whole output and one streamed in any pieces read it alike.
      const size_t m = held_.find(kMessage);
      if (m == std::string::npos || m + kMessage.size() > kMaxHeader) {
        if (held_.size() >= kMaxHeader) {
          // Not a header: its opener is text, and so is what follows it up
          // to the next marker. Passing the opener's first byte now is what
          // keeps the body reader from handing the same "<|" straight back.
          route_ = Route::content;
          emit(out, std::string_view(held_).substr(0, 1));
          held_.erase(0, 1);
          in_body_ = true;
          continue;
        }
        if (!last) return;
        // A header with no body says nothing; the first bytes of one
        // that never came are text.
        if (opens_header(held_) == Opens::maybe) emit(out, held_);
        held_.clear();
        return;
      }
      begin_body(std::string_view(held_).substr(0, m));
      held_.erase(0, m + kMessage.size());
      in_body_ = true;
      continue;
    }
    size_t end = std::string::npos;
    std::string_view marker;
    for (std::string_view mk : kBodyEnds) {
      const size_t at = held_.find(mk);
      if (at < end) {
        end = at;
        marker = mk;
      }
    }
    if (end == std::string::npos) {
      const size_t keep = last ? 0 : partial_marker(held_);
      emit(out, std::string_view(held_).substr(0, held_.size() - keep));
      held_.erase(0, held_.size() - keep);
      if (last) end_body(out);
      return;
    }
    emit(out, std::string_view(held_).substr(0, end));
    end_body(out);
    // A new header stays for the header reader; an end marker goes.
    const bool header = marker == kStart || marker == kChannel;
    held_.erase(0, end + (header ? 0 : marker.size()));
    in_body_ = false;
  }
}

void HarmonyStream::begin_body(std::string_view header) {
  const std::string channel = word_after(header, kChannel);
  const std::string recipient = word_after(header, "to=");
  call_body_.clear();
  call_name_.clear();
  if (recipient.starts_with("functions.")) {
    route_ = Route::call;
    call_name_ = recipient.substr(std::string_view("functions.").size());
  } else {
    route_ = channel == "analysis" ? Route::reasoning : Route::content;
  }
}

void HarmonyStream::end_body(HarmonyParts& out) {
  if (route_ == Route::call) {
    // A call Troupe can return: a listed function and an object of
    // arguments. Anything else goes out as the text it is.
    const std::string_view args = trim(call_body_);
    const nlohmann::json parsed = nlohmann::json::parse(args, nullptr, /*allow_exceptions=*/false);
    const bool known = std::find(names_.begin(), names_.end(), call_name_) != names_.end();
    if (known && parsed.is_object()) {
      calls_.push_back({.name = call_name_, .arguments = std::string(args)});
    } else {
      out.content += call_body_;
    }
    call_body_.clear();
  }
  route_ = Route::content;
}

void HarmonyStream::emit(HarmonyParts& out, std::string_view text) {
  switch (route_) {
    case Route::reasoning: out.reasoning += text; return;
    case Route::content: out.content += text; return;
    case Route::call: call_body_ += text; return;
  }
}

HarmonyParts read_harmony(std::string_view text, const std::vector<std::string>& names,
                          std::vector<grammar::ToolCall>& calls) {
  HarmonyStream s(names);
  HarmonyParts out = s.push(text);
  HarmonyParts rest = s.finish(calls);
  out.reasoning += rest.reasoning;
  out.content += rest.content;
  return out;
}

}  // namespace troupe::net
