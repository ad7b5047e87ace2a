// The HTTP/WebSocket server: a listener on host:port and a few I/O threads
// serving a ServerCore (net/routes.hpp). Beast and Asio stay behind this
// small interface.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace troupe::net {

class ServerCore;

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless told otherwise
  uint16_t port = 8080;            // 0: any free port (see Server::port)
  int io_threads = 2;
  int idle_timeout_s = 60;   // keep-alive connections with nothing to read
  int write_timeout_s = 60;  // a client that takes nothing for this long is dropped
  // Slowloris: a request's line and headers must arrive within this many
  // seconds of its first byte (431 past max_header_bytes).
  int header_timeout_s = 10;
  int max_header_bytes = 16 << 10;
  // Open connections, HTTP and WebSocket together. At the limit a new
  // connection closes the longest-open idle keep-alive one; with none idle
  // it gets a 503 and is closed.
  int max_connections = 1024;
  // A WebSocket that sends nothing is pinged after half this; one that
  // answers nothing (not even the pong) for this long is closed.
  int ws_ping_timeout_s = 60;
  // SO_SNDBUF of each connection (the kernel doubles it); 0 keeps the
  // kernel's autotuning, which may buffer megabytes for a client that
  // reads nothing. Kept small so that the server's own bounded queue
  // (ServerLimits::send_queue_bytes) is what notices a slow reader.
  int socket_send_buffer = 256 << 10;
};

class Server {
 public:
  // Binds and listens; throws Error(io) naming host:port when it cannot.
  // `core` must outlive the server.
  static std::unique_ptr<Server> start(ServerCore& core, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // The port actually bound.
  uint16_t port() const;
  // Blocks until SIGINT or SIGTERM arrives, stop() is called, or `until`
  // (when given) returns true; it is asked every 100 ms. From the first
  // signal on, a second SIGINT or SIGTERM ends the process at once
  // (_Exit(128 + signal)), whatever it is doing.
  void wait_for_signal(const std::function<bool()>& until = {});
  // Graceful shutdown: refuses new generation requests (503, /ready 503
  // "draining") while the listener still answers, lets the requests in
  // flight finish for up to grace_s, then ends each remaining one cleanly
  // (GenerationJob::shutdown: SSE gets a last chunk with finish_reason
  // "cancelled", an error event, [DONE]; WebSocket a final "cancelled"),
  // waits for those bytes to be written, and stop()s (WebSocket close 1001).
  void shutdown(double grace_s);
  // Stops accepting, closes every connection (cancelling its requests),
  // waits up to `drain_s` for requests to end, then joins the I/O threads.
  // Queued handlers are kept until destruction, so pipeline callbacks that
  // arrive afterwards still find the I/O context. Repeatable.
  void stop(double drain_s = 5.0);

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::net
