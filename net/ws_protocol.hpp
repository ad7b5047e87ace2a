// The WebSocket protocol of /v1/stream (docs/api.md), apart from the socket:
// requests under the client's own ids, several at once on one connection,
// token and final frames per request, cancel by id, and everything
// cancelled when the connection goes. Tests drive it with a fake output.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "net/generation.hpp"

namespace troupe::net {

class ServerCore;

// The transport side of one connection. Thread-safe and non-blocking.
class WsOutput {
 public:
  virtual ~WsOutput() = default;
  // Queues one text message; false when the connection is being dropped
  // (closed, or its send queue is over the bound).
  virtual bool send_text(std::string frame) = 0;
};

class WsConnection : public std::enable_shared_from_this<WsConnection> {
 public:
  static std::shared_ptr<WsConnection> create(ServerCore& core, std::shared_ptr<WsOutput> out);

  // The first frame the server sends.
  std::string hello() const;
  // One whole text message from the client.
  void on_message(std::string_view text);
  // The connection is gone: every request still running is cancelled.
  void on_closed();

  size_t running() const;

 private:
  WsConnection(ServerCore& core, std::shared_ptr<WsOutput> out) : core_(core), out_(std::move(out)) {}
  class RequestListener;
  void generate(const std::string& id, const ParsedRequest& r);
  void cancel(const std::string& id);
  void finished(const std::string& id);
  void send_error(const std::string& id, const ApiError& e);

  ServerCore& core_;
  std::shared_ptr<WsOutput> out_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<GenerationJob>, std::less<>> jobs_;
  bool closed_ = false;
};

}  // namespace troupe::net
