// One WebSocket connection of /v1/stream: reads whole text messages under a
// size limit (over it: close 1009 with a reason), hands them to the
// protocol (net/ws_protocol.hpp), writes its frames from a bounded queue (a
// client too slow to keep up is dropped and its requests cancelled).
#include "net/ws_session.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/websocket/stream.hpp>

#include <atomic>
#include <deque>
#include <optional>

#include "net/routes.hpp"
#include "net/ws_protocol.hpp"

namespace troupe::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;

class WsSession : public Closable, public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(beast::tcp_stream&& stream, std::shared_ptr<TransportContext> ctx)
      : ws_(std::move(stream)), ctx_(std::move(ctx)), core_(ctx_->core) {
    core_.metrics().connection_opened(ConnectionKind::websocket);
  }

  ~WsSession() override {
    core_.metrics().connection_closed(ConnectionKind::websocket);
    --ctx_->open_connections;  // counted since the HTTP session it was upgraded from
  }

  void run(http::request<http::string_body> upgrade) {
    upgrade_ = std::move(upgrade);
    // Beast's server defaults, but with keep-alive pings: a client silent
    // for half of ws_ping_timeout is pinged, one silent for all of it
    // (no pong either: gone, or stalled) is closed.
    websocket::stream_base::timeout timeouts = websocket::stream_base::timeout::suggested(beast::role_type::server);
    timeouts.idle_timeout = ctx_->ws_ping_timeout;
    timeouts.keep_alive_pings = true;
    ws_.set_option(timeouts);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, "troupe"); }));
    // Beast's own limit would close without a reason: ours (on_read) comes
    // first and says why.
    ws_.read_message_max(0);
    ws_.text(true);
    ws_.async_accept(upgrade_, [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

  void close_now() override {
    asio::post(ws_.get_executor(), [self = shared_from_this()] {
      self->start_close(websocket::close_reason(websocket::close_code::going_away, "the server is shutting down"));
    });
  }

  size_t pending_bytes() const override { return closed_ ? 0 : backlog_.load(); }

  bool reserve(size_t n) {
    if (closed_) return false;
    if (backlog_.fetch_add(n) + n > core_.options().limits.send_queue_bytes) {
      asio::post(ws_.get_executor(), [self = shared_from_this()] { self->drop_slow_reader(); });
      return false;
    }
    return true;
  }

  template <class F>
  void on_strand(F&& f) {
    asio::post(ws_.get_executor(), std::forward<F>(f));
  }

  void push(std::string frame, size_t reserved) {
    backlog_ += frame.size();
    backlog_ -= reserved;
    if (closed_ || closing_) {
      backlog_ -= frame.size();
      return;
    }
    queue_.push_back(std::move(frame));
    if (!writing_) do_write();
  }

 private:
  void on_accept(beast::error_code ec) {
    if (ec) return;  // the handshake failed; nothing was started
    conn_ = WsConnection::create(core_, make_output());
    push(conn_->hello(), 0);
    do_read();
  }

  std::shared_ptr<WsOutput> make_output();

  size_t limit() const { return core_.options().limits.ws_max_message_bytes; }

  void do_read() {
    const size_t room = limit() + 1 - std::min(buffer_.size(), limit());
    ws_.async_read_some(buffer_, room,
                        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) {
      // Closed by the client, reset, or our own close finishing.
      if (conn_ && conn_->running() > 0 && !closing_) core_.metrics().disconnected(DisconnectReason::closed);
      finish();
      return;
    }
    if (closing_) return;
    if (buffer_.size() > limit()) {
      core_.metrics().disconnected(DisconnectReason::message_too_big);
      return start_close(websocket::close_reason(websocket::close_code::too_big,
                                                 "message over the limit of " + std::to_string(limit()) + " bytes"));
    }
    if (!ws_.is_message_done()) return do_read();
    if (!ws_.got_text()) {
      push(ws_error({}, ApiError(400, "binary messages are not supported; send JSON text", {}, "binary_message")), 0);
    } else {
      conn_->on_message(beast::buffers_to_string(buffer_.data()));
    }
    buffer_.consume(buffer_.size());
    do_read();
  }

  void do_write() {
    writing_ = true;
    ws_.async_write(asio::buffer(queue_.front()),
                    [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    if (ec) return finish();
    backlog_ -= queue_.front().size();
    queue_.pop_front();
    if (closing_) return do_close();
    if (!queue_.empty()) do_write();
  }

  // A close handshake with a reason, after the write in progress.
  void start_close(websocket::close_reason reason) {
    if (closing_ || closed_) return;
    closing_ = true;
    close_reason_ = std::move(reason);
    if (conn_) conn_->on_closed();
    if (!writing_) do_close();
  }

  void do_close() {
    for (const std::string& f : queue_) backlog_ -= f.size();
    queue_.clear();
    ws_.async_close(close_reason_, [self = shared_from_this()](beast::error_code) { self->finish(); });
  }

  // The client does not read: nothing would get through, not even a close
  // frame, so the connection is cut.
  void drop_slow_reader() {
    if (closed_) return;
    core_.metrics().disconnected(DisconnectReason::slow_reader);
    finish();
  }

  void finish() {
    if (closed_) return;
    closed_ = true;
    if (conn_) conn_->on_closed();
    beast::error_code ec;
    beast::get_lowest_layer(ws_).socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    beast::get_lowest_layer(ws_).close();
    queue_.clear();
  }

  websocket::stream<beast::tcp_stream> ws_;
  std::shared_ptr<TransportContext> ctx_;
  ServerCore& core_;
  http::request<http::string_body> upgrade_;
  beast::flat_buffer buffer_;
  std::shared_ptr<WsConnection> conn_;
  std::deque<std::string> queue_;
  std::atomic<size_t> backlog_{0};
  std::atomic<bool> closed_{false};
  bool closing_ = false;
  bool writing_ = false;
  websocket::close_reason close_reason_;
};

class SessionOutput : public WsOutput {
 public:
  explicit SessionOutput(std::weak_ptr<WsSession> s) : session_(std::move(s)) {}

  bool send_text(std::string frame) override {
    auto s = session_.lock();
    if (!s || !s->reserve(frame.size())) return false;
    const size_t n = frame.size();
    s->on_strand([s, f = std::move(frame), n]() mutable { s->push(std::move(f), n); });
    return true;
  }

 private:
  std::weak_ptr<WsSession> session_;
};

std::shared_ptr<WsOutput> WsSession::make_output() { return std::make_shared<SessionOutput>(weak_from_this()); }

}  // namespace

void start_ws_session(beast::tcp_stream stream, http::request<http::string_body> upgrade,
                      std::shared_ptr<TransportContext> ctx) {
  auto session = std::make_shared<WsSession>(std::move(stream), ctx);
  ctx->add(session);
  session->run(std::move(upgrade));
}

}  // namespace troupe::net
