// Internal to net/: what the listener and the two session kinds share. The
// public API (net/server.hpp) does not include this, so Beast and Asio stay
// inside the transport's translation units.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <atomic>
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
  // Bytes queued for the client and not written yet (a graceful shutdown
  // waits for them before it closes). Thread-safe.
  virtual size_t pending_bytes() const { return 0; }
  // Waiting for the first byte of a request on a kept-alive connection:
  // the server may close it to make room for a new one. Thread-safe.
  virtual bool idle() const { return false; }
};

struct TransportContext {
  explicit TransportContext(ServerCore& c) : core(c) {}
  ServerCore& core;
  std::chrono::seconds idle_timeout{60};   // keep-alive connections with nothing to read
  std::chrono::seconds write_timeout{60};  // a write that makes no progress this long drops the client
  int socket_send_buffer = 0;              // SO_SNDBUF of accepted sockets; 0: the kernel's default
  std::chrono::seconds header_timeout{10};  // from a request's first byte to the end of its headers
  size_t max_header_bytes = 16 << 10;      // request line and headers
  std::chrono::seconds ws_ping_timeout{60};  // a silent WebSocket is pinged at half this, closed at it
  int max_connections = 1024;              // HTTP and WebSocket together; see Listener::on_accept
  std::atomic<int> open_connections{0};    // sessions alive, an upgraded one counted once

  // At max_connections: closes the longest-open idle keep-alive connection
  // (asynchronously) and returns true, or false when none is idle.
  bool close_one_idle();

  void add(const std::shared_ptr<Closable>& s);
  void close_all();
  size_t pending_bytes();  // summed over the live sessions
  std::vector<std::weak_ptr<Closable>> sessions();  // the live ones, now

 private:
  std::mutex mutex_;
  std::vector<std::weak_ptr<Closable>> live_;
};

// Serves HTTP/1.1 on an accepted socket (and hands WebSocket upgrades of
// /v1/stream on to a WebSocket session).
void start_http_session(boost::asio::ip::tcp::socket socket, std::shared_ptr<TransportContext> ctx);

}  // namespace troupe::net
