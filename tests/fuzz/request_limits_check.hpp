// What every parsed request must satisfy, whichever endpoint or WebSocket
// message it came from (shared by request_parser_fuzz and ws_message_fuzz).
#pragma once

#include <cstdint>
#include <string>

#include "net/api_error.hpp"
#include "net/request_parser.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace troupe::fuzz {

inline const net::RequestLimits kFuzzLimits{
    .max_tokens = 64, .max_n = 4, .max_prompts = 4, .max_stop = 2, .max_messages = 8};

inline void check_limits(const net::ParsedRequest& r, const net::RequestLimits& l) {
  check(r.n >= 1 && r.n <= l.max_n);
  check(!r.max_tokens || (*r.max_tokens >= 1 && *r.max_tokens <= l.max_tokens));
  check(static_cast<int32_t>(r.params.stop.size()) <= l.max_stop);
  for (const std::string& s : r.params.stop) check(!s.empty());
  check(r.top_logprobs >= 0 && r.top_logprobs <= 20);
  check(r.params.sampling.temperature >= 0.0f && r.params.sampling.temperature <= 2.0f);
  check(r.params.sampling.top_p > 0.0f && r.params.sampling.top_p <= 1.0f);
  if (r.endpoint == net::Endpoint::chat) {
    check(!r.chat.messages.empty() && static_cast<int32_t>(r.chat.messages.size()) <= l.max_messages);
  } else {
    check(r.prompts.empty() != r.token_prompts.empty());
  }
}

// A refusal is a 400 with a JSON body, never another status.
inline void check_error(const net::ApiError& e) {
  check(e.status() == 400);
  check(!net::error_body(e).empty());
}

}  // namespace troupe::fuzz
