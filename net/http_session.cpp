// One HTTP/1.1 connection: read a request (bounded body), route it, write
// the reply from a bounded queue of bytes, keep alive or close. While a
// generation runs, the socket is watched for the client hanging up, which
// cancels the request in the pipeline at once. Upgrades of /v1/stream go to
// net/ws_session.cpp.
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include <array>
#include <atomic>
#include <deque>
#include <optional>

#include "net/api_error.hpp"
#include "net/routes.hpp"
#include "net/transport.hpp"
#include "net/ws_session.hpp"

namespace troupe::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr size_t kMaxDrainBytes = 16 << 20;  // read and dropped before closing after an error reply

class HttpSession : public Closable, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket&& socket, std::shared_ptr<TransportContext> ctx)
      : stream_(std::move(socket)), ctx_(std::move(ctx)), core_(ctx_->core) {
    core_.metrics().connection_opened(ConnectionKind::http);
    ++ctx_->open_connections;
  }

  ~HttpSession() override {
    if (upgraded_) return;  // the WebSocket session carries the connection on
    core_.metrics().connection_closed(ConnectionKind::http);
    --ctx_->open_connections;
  }

  void run() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }

  void close_now() override {
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->drop(std::nullopt); });
  }

  size_t pending_bytes() const override { return closed_ ? 0 : backlog_.load(); }
  bool idle() const override { return idle_.load() && !closed_.load(); }

  // For the reply writer, from any thread.
  bool closed() const { return closed_.load(); }
  // Counts bytes about to be posted; false (and the connection is dropped)
  // when the client is this far behind.
  bool reserve(size_t n) {
    if (closed_) return false;
    if (backlog_.fetch_add(n) + n > core_.options().limits.send_queue_bytes) {
      asio::post(stream_.get_executor(), [self = shared_from_this()] { self->drop(DisconnectReason::slow_reader); });
      return false;
    }
    return true;
  }
  template <class F>
  void on_strand(F&& f) {
    asio::post(stream_.get_executor(), std::forward<F>(f));
  }

  // Writer operations, on the strand; `seq` names the reply they belong to,
  // so late calls for an earlier reply are ignored.
  void write_whole(uint64_t seq, const HttpReply& reply, size_t reserved) {
    if (seq != reply_seq_ || closed_ || reply_done_) return release(reserved);
    count(reply.status);
    push(serialize_reply(reply, version_, keep_alive_, false), reserved);
    reply_done_ = true;
  }
  void write_head(uint64_t seq, const HttpReply& head, size_t reserved) {
    if (seq != reply_seq_ || closed_ || reply_done_ || head_sent_) return release(reserved);
    count(head.status);
    head_sent_ = true;
    push(serialize_reply(head, version_, keep_alive_, true), reserved);
  }
  void write_chunk(uint64_t seq, std::string data, size_t reserved) {
    if (seq != reply_seq_ || closed_ || reply_done_ || !head_sent_) return release(reserved);
    push(version_ == 10 ? std::move(data) : chunk_frame(data), reserved);
  }
  void write_end(uint64_t seq) {
    if (seq != reply_seq_ || closed_ || reply_done_) return;
    if (version_ == 10) {
      keep_alive_ = false;  // the body ends with the connection
    } else {
      push(std::string(kLastChunk), 0);
    }
    reply_done_ = true;
    if (!writing_ && queue_.empty()) finish_reply();
  }

 private:
  void count(int status) { core_.metrics().http_response(status); }
  void release(size_t reserved) { backlog_ -= reserved; }

  // Two deadlines per request: idle_timeout for its first byte (a kept-alive
  // connection with nothing to say), then header_timeout for the rest of
  // its headers, so a client trickling a header byte by byte (slowloris)
  // holds the connection for seconds, not minutes.
  void do_read() {
    parser_.emplace();
    parser_->body_limit(core_.options().limits.max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(ctx_->max_header_bytes));
    if (buffer_.size() > 0) return read_header();  // a pipelined request is already here
    idle_ = true;
    stream_.expires_after(ctx_->idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->idle_ = false;
      self->buffer_.commit(n);
      if (ec) return self->on_read(ec);
      self->read_header();
    });
  }

  void read_header() {
    stream_.expires_after(ctx_->header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // A client that sent "Expect: 100-continue" (curl does for bodies over
  // 1 KiB) waits for this before sending its body. A body over the limit
  // has already failed the header read (413), so it is never asked for.
  void on_header(beast::error_code ec) {
    if (ec || closed_) return on_read(ec);
    stream_.expires_after(ctx_->idle_timeout);  // the body: as long as a request may take to upload
    if (!beast::iequals(parser_->get()[http::field::expect], "100-continue")) return read_body();
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                      [self = shared_from_this()](beast::error_code wec, size_t) {
                        if (wec) return self->drop(std::nullopt);
                        self->read_body();
                      });
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (closed_) return;
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::eof ||
        ec == asio::error::connection_reset) {
      return drop(std::nullopt);
    }
    if (ec) {
      // The request cannot be read to its end: answer, then close.
      keep_alive_ = false;
      version_ = 11;
      ++reply_seq_;
      head_sent_ = false;
      reply_done_ = false;
      if (ec == http::error::body_limit) {
        return write_whole(
            reply_seq_,
            core_.error_reply(ApiError(413,
                                       "the request body is over the limit of " +
                                           std::to_string(core_.options().limits.max_body_bytes) + " bytes",
                                       {}, "request_too_large")),
            0);
      }
      if (ec == http::error::header_limit) {
        return write_whole(
            reply_seq_, core_.error_reply(ApiError(431, "the request headers are too large", {}, "headers_too_large")),
            0);
      }
      if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
        return write_whole(
            reply_seq_, core_.error_reply(ApiError(400, "malformed HTTP request: " + ec.message(), {}, "bad_http")), 0);
      }
      return drop(std::nullopt);
    }

    http::request<http::string_body>& req = parser_->get();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    ++reply_seq_;
    head_sent_ = false;
    reply_done_ = false;
    HttpRequest view{.method = std::string(req.method_string()),
                     .target = std::string(req.target()),
                     .authorization = std::string(req[http::field::authorization]),
                     .api_key = std::string(req["x-api-key"])};

    if (beast::websocket::is_upgrade(req)) {
      if (auto refusal = core_.check_upgrade(view)) {
        keep_alive_ = false;
        return write_whole(reply_seq_, *refusal, 0);
      }
      upgraded_ = true;
      core_.metrics().connection_closed(ConnectionKind::http);
      stream_.expires_never();
      start_ws_session(std::move(stream_), parser_->release(), ctx_);
      return;
    }

    view.body = std::move(req.body());
    RouteResult result = core_.handle(view);
    if (!result.async) return write_whole(reply_seq_, result.reply, 0);
    pending_ = std::move(result.async);
    stream_.expires_never();  // a generation may take long; writes set their own deadline
    start_watch();
    pending_->start(make_writer());
  }

  std::shared_ptr<ReplyWriter> make_writer();

  void push(std::string bytes, size_t reserved) {
    // Bytes the writer reserved are already counted in backlog_.
    backlog_ += bytes.size();
    backlog_ -= reserved;
    queue_.push_back(std::move(bytes));
    if (!writing_) do_write();
  }

  void do_write() {
    writing_ = true;
    stream_.expires_after(ctx_->write_timeout);
    asio::async_write(stream_, asio::buffer(queue_.front()),
                      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    if (closed_) return;
    if (ec) {
      return drop(ec == beast::error::timeout ? DisconnectReason::slow_reader : DisconnectReason::closed);
    }
    backlog_ -= queue_.front().size();
    queue_.pop_front();
    if (!queue_.empty()) return do_write();
    if (reply_done_) finish_reply();
  }

  void finish_reply() {
    pending_.reset();
    stop_watch();
    if (keep_alive_) return do_read();
    // Half-close and drain what the client still sends, so that closing
    // with unread input does not reset the connection before the client
    // has read the reply (a 413 after a large upload).
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(2));
    do_drain();
  }

  void do_drain() {
    stream_.async_read_some(asio::buffer(drain_buf_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->drained_ += n;
      if (ec || self->drained_ > kMaxDrainBytes) return self->drop(std::nullopt);
      self->do_drain();
    });
  }

  // Watches for the client hanging up while its reply is being produced.
  void start_watch() {
    watching_ = true;
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), seq = reply_seq_](
                                                            beast::error_code ec) { self->on_watch(ec, seq); });
  }

  void stop_watch() {
    if (!watching_) return;
    watching_ = false;
    beast::error_code ec;
    stream_.socket().cancel(ec);
  }

  void on_watch(beast::error_code ec, uint64_t seq) {
    if (ec || closed_ || seq != reply_seq_ || !watching_ || !pending_) return;
    char c = 0;
    beast::error_code peek_ec;
    stream_.socket().non_blocking(true, peek_ec);
    const size_t n = stream_.socket().receive(asio::buffer(&c, 1), tcp::socket::message_peek, peek_ec);
    beast::error_code ignored;
    stream_.socket().non_blocking(false, ignored);
    if (peek_ec == asio::error::would_block) return start_watch();  // a spurious wake-up
    if (!peek_ec && n == 1) {
      watching_ = false;  // a pipelined request: read after this reply
      return;
    }
    drop(DisconnectReason::closed);
  }

  // Closes the connection; a reply still being produced is cancelled (and
  // counted as a disconnect of `reason`). A finished reply whose last
  // write is in flight is not: a client that closes as soon as it has read
  // those bytes can be seen leaving before that write's handler runs.
  void drop(std::optional<DisconnectReason> reason) {
    if (closed_) return;
    closed_ = true;
    if (pending_) {
      const bool last_write_out = reply_done_ && queue_.size() <= 1;
      if (reason && !last_write_out) core_.metrics().disconnected(*reason);
      pending_->cancel();
      pending_.reset();
    }
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    queue_.clear();
  }

  beast::tcp_stream stream_;
  std::shared_ptr<TransportContext> ctx_;
  ServerCore& core_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> queue_;
  std::atomic<size_t> backlog_{0};  // bytes queued or posted, not yet written
  std::atomic<bool> closed_{false};
  std::atomic<bool> idle_{false};  // waiting for a request's first byte (TransportContext::close_one_idle)
  std::shared_ptr<AsyncReply> pending_;
  uint64_t reply_seq_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool writing_ = false;
  bool head_sent_ = false;
  bool reply_done_ = false;
  bool watching_ = false;
  bool upgraded_ = false;
  std::array<char, 8192> drain_buf_{};
  size_t drained_ = 0;
};

// Hands the routes' bytes to the session's strand; holds the session weakly
// so that a reply finishing after the client left costs nothing.
class SessionWriter : public ReplyWriter {
 public:
  SessionWriter(std::weak_ptr<HttpSession> s, uint64_t seq) : session_(std::move(s)), seq_(seq) {}

  void send(HttpReply reply) override {
    auto s = session_.lock();
    if (!s) return;
    s->on_strand([s, seq = seq_, r = std::move(reply)] { s->write_whole(seq, r, 0); });
  }

  bool send_head(const HttpReply& head) override {
    auto s = session_.lock();
    if (!s || s->closed()) return false;
    s->on_strand([s, seq = seq_, h = head] { s->write_head(seq, h, 0); });
    return true;
  }

  bool send_chunk(std::string data) override {
    auto s = session_.lock();
    if (!s || !s->reserve(data.size())) return false;
    const size_t n = data.size();
    s->on_strand([s, seq = seq_, d = std::move(data), n]() mutable { s->write_chunk(seq, std::move(d), n); });
    return true;
  }

  void end() override {
    auto s = session_.lock();
    if (!s) return;
    s->on_strand([s, seq = seq_] { s->write_end(seq); });
  }

 private:
  std::weak_ptr<HttpSession> session_;
  uint64_t seq_;
};

std::shared_ptr<ReplyWriter> HttpSession::make_writer() {
  return std::make_shared<SessionWriter>(weak_from_this(), reply_seq_);
}

}  // namespace

void start_http_session(tcp::socket socket, std::shared_ptr<TransportContext> ctx) {
  auto session = std::make_shared<HttpSession>(std::move(socket), ctx);
  ctx->add(session);
  session->run();
}

}  // namespace troupe::net
