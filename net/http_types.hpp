// The seam between routing and transport: a request as the routes see it,
// a reply, and the two interfaces of an asynchronous reply (the routes'
// AsyncReply producing, the session's ReplyWriter delivering). No Beast.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace troupe::net {

struct HttpRequest {
  std::string method;  // GET, POST, ...
  std::string target;  // path and query, as sent
  std::string authorization;
  std::string api_key;  // x-api-key (Anthropic's clients send the key there)
  std::string body;
};

struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones
  std::string body;
};

// Implemented by the transport. Thread-safe and non-blocking: calls queue
// bytes for the connection's strand. Either send() once, or send_head()
// then send_chunk()s then end().
class ReplyWriter {
 public:
  virtual ~ReplyWriter() = default;
  virtual void send(HttpReply reply) = 0;
  virtual bool send_head(const HttpReply& head) = 0;  // a chunked reply from here on
  // False when the client is gone or its send queue is over its bound
  // (the connection is then being dropped): stop producing.
  virtual bool send_chunk(std::string data) = 0;
  virtual void end() = 0;
};

// Implemented by the routes: a reply produced later (a generation).
class AsyncReply {
 public:
  virtual ~AsyncReply() = default;
  virtual void start(std::shared_ptr<ReplyWriter> writer) = 0;
  virtual void cancel() = 0;  // the client went away
};

struct RouteResult {
  HttpReply reply;                    // when async is null
  std::shared_ptr<AsyncReply> async;  // a reply that comes later
};

}  // namespace troupe::net
