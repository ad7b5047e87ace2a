// libFuzzer target for the request parser (net/request_parser.cpp): any
// bytes as a /v1/completions body, a /v1/chat/completions body and a
// WebSocket message. The parser must either return a request within the
// limits or throw ApiError (a 400 with a JSON body); anything else (a crash,
// a sanitizer report, another exception) is a bug. Built and run briefly by
// run_fuzzer.py.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "net/api_error.hpp"
#include "net/request_parser.hpp"

namespace {

using troupe::net::ApiError;
using troupe::net::ParsedRequest;
using troupe::net::RequestLimits;

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void check_limits(const ParsedRequest& r, const RequestLimits& l) {
  check(r.n >= 1 && r.n <= l.max_n);
  check(!r.max_tokens || (*r.max_tokens >= 1 && *r.max_tokens <= l.max_tokens));
  check(static_cast<int32_t>(r.params.stop.size()) <= l.max_stop);
  for (const std::string& s : r.params.stop) check(!s.empty());
  check(r.top_logprobs >= 0 && r.top_logprobs <= 20);
  check(r.params.sampling.temperature >= 0.0f && r.params.sampling.temperature <= 2.0f);
  check(r.params.sampling.top_p > 0.0f && r.params.sampling.top_p <= 1.0f);
  if (r.endpoint == troupe::net::Endpoint::chat) {
    check(!r.messages.empty() && static_cast<int32_t>(r.messages.size()) <= l.max_messages);
  } else {
    check(r.prompts.empty() != r.token_prompts.empty());
  }
}

void check_error(const ApiError& e) {
  check(e.status() == 400);
  check(!troupe::net::error_body(e).empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const RequestLimits limits{.max_tokens = 64, .max_n = 4, .max_prompts = 4, .max_stop = 2, .max_messages = 8};
  try {
    check_limits(troupe::net::parse_completion_request(text, limits), limits);
  } catch (const ApiError& e) {
    check_error(e);
  }
  try {
    check_limits(troupe::net::parse_chat_request(text, limits), limits);
  } catch (const ApiError& e) {
    check_error(e);
  }
  try {
    std::string id;
    const auto m = troupe::net::parse_ws_message(text, limits, &id);
    check(!m.id.empty() && m.id.size() <= 128 && id == m.id);
    if (m.kind == troupe::net::WsClientMessage::Kind::generate) check_limits(m.request, limits);
  } catch (const ApiError& e) {
    check_error(e);
  }
  return 0;
}
