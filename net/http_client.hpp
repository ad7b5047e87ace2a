// A small blocking HTTP/1.1 client for measuring a running server: one
// request per connection, the whole exchange bounded by one deadline, and
// the body handed over piece by piece as it arrives (so SSE events can be
// timestamped). Beast stays behind this interface, as in net/server.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace troupe::net {

struct HttpClientRequest {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;
  std::string method = "GET";
  std::string target = "/";
  std::string body;     // sent as application/json when non-empty
  std::string api_key;  // Authorization: Bearer, when set
  double timeout_s = 60;  // connect + write + read, all together
};

struct HttpClientResult {
  int status = 0;     // 0: no response head arrived
  std::string error;  // empty: the body was read to its end (or on_body stopped it)
};

struct HttpClientHandlers {
  std::function<void(int status)> on_head;  // once, before any body
  // Each piece of the body as read (chunk framing removed); false stops reading.
  std::function<bool(std::string_view piece)> on_body;
};

// Never throws for network trouble: a refused connection, a timeout or a
// malformed response is a message in `error` naming the request
// ("POST 127.0.0.1:8080/v1/completions: connecting: Connection refused").
HttpClientResult http_call(const HttpClientRequest& req, const HttpClientHandlers& handlers);

// The whole body into `body` (cut at `max_body` bytes, which is no error).
HttpClientResult http_call(const HttpClientRequest& req, std::string& body, size_t max_body = 64 << 20);

}  // namespace troupe::net
