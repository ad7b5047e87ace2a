// Internal to net/: what the listener and the two session kinds share. The
// public API (net/server.hpp) does not include this, so Beast and Asio stay
// inside the transport's translation units.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/reply_bytes.hpp"

namespace troupe::net {

class ServerCore;

// A session the server can close when it stops.
class Closable {
 public:
  virtual ~Closable() = default;
  virtual void close_now() = 0;  // thread-safe: posts onto the session's strand
};

struct TransportContext {
  explicit TransportContext(ServerCore& c) : core(c) {}
  ServerCore& core;
  std::chrono::seconds idle_timeout{60};   // keep-alive connections with nothing to read
  std::chrono::seconds write_timeout{60};  // a write that makes no progress this long drops the client
  int socket_send_buffer = 0;              // SO_SNDBUF of accepted sockets; 0: the kernel's default

  void add(const std::shared_ptr<Closable>& s);
  void close_all();

 private:
  std::mutex mutex_;
  std::vector<std::weak_ptr<Closable>> live_;
};

// Serves HTTP/1.1 on an accepted socket (and hands WebSocket upgrades of
// /v1/stream on to a WebSocket session).
void start_http_session(boost::asio::ip::tcp::socket socket, std::shared_ptr<TransportContext> ctx);

}  // namespace troupe::net
