// The listener (accept loop, one strand per connection, as in Beast's
// advanced server example), the I/O threads, signal handling and orderly
// shutdown.
#include "net/server.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

#include "core/error.hpp"
#include "net/routes.hpp"
#include "net/transport.hpp"

namespace troupe::net {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(asio::io_context& ioc, tcp::endpoint endpoint, std::shared_ptr<TransportContext> ctx)
      : ioc_(ioc), acceptor_(asio::make_strand(ioc)), ctx_(std::move(ctx)) {
    boost::system::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      throw Error(Errc::io, "cannot listen on " + endpoint.address().to_string() + ":" +
                                std::to_string(endpoint.port()) + ": " + ec.message());
    }
  }

  uint16_t port() const { return acceptor_.local_endpoint().port(); }

  void run() { do_accept(); }

  void stop() {
    asio::post(acceptor_.get_executor(), [self = shared_from_this()] {
      boost::system::error_code ec;
      self->acceptor_.close(ec);
    });
  }

 private:
  void do_accept() {
    // Each connection gets its own strand: its handlers never run at once.
    acceptor_.async_accept(asio::make_strand(ioc_),
                           [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
                             self->on_accept(ec, std::move(socket));
                           });
  }

  void on_accept(boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      // Tokens go out as small writes: no Nagle delay. Failures here only
      // cost performance, so they are ignored.
      boost::system::error_code opt_ec;
      socket.set_option(tcp::no_delay(true), opt_ec);
      if (ctx_->socket_send_buffer > 0) {
        socket.set_option(asio::socket_base::send_buffer_size(ctx_->socket_send_buffer), opt_ec);
      }
      if (ctx_->open_connections.load() >= ctx_->max_connections && !ctx_->close_one_idle()) {
        refuse_busy(socket);
      } else {
        start_http_session(std::move(socket), ctx_);
      }
    } else if (ec != asio::error::connection_aborted) {
      // Out of file descriptors, say: log, and keep accepting after a pause
      // rather than spinning.
      std::fprintf(stderr, "troupe serve: accept: %s\n", ec.message().c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    do_accept();
  }

  // Every connection busy with a request: a short 503 written straight to
  // the fresh socket (its send buffer is empty, so this does not block), then
  // closed. Nothing is read, so a flood of these costs no more than the accept.
  static void refuse_busy(tcp::socket& socket) {
    static constexpr std::string_view kBody =
        R"({"error":{"message":"the server is at its connection limit; retry later","type":"server_busy",)"
        R"("param":null,"code":"too_many_connections"}})";
    const std::string reply = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                              "Retry-After: 1\r\nConnection: close\r\nContent-Length: " +
                              std::to_string(kBody.size()) + "\r\n\r\n" + std::string(kBody);
    boost::system::error_code ec;
    socket.non_blocking(true, ec);
    asio::write(socket, asio::buffer(reply), ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }

  asio::io_context& ioc_;
  tcp::acceptor acceptor_;
  std::shared_ptr<TransportContext> ctx_;
};

}  // namespace

void TransportContext::add(const std::shared_ptr<Closable>& s) {
  std::lock_guard lock(mutex_);
  std::erase_if(live_, [](const std::weak_ptr<Closable>& w) { return w.expired(); });
  live_.push_back(s);
}

size_t TransportContext::pending_bytes() {
  std::lock_guard lock(mutex_);
  size_t n = 0;
  for (const auto& w : live_) {
    if (auto s = w.lock()) n += s->pending_bytes();
  }
  return n;
}

bool TransportContext::close_one_idle() {
  std::shared_ptr<Closable> victim;
  {
    std::lock_guard lock(mutex_);
    for (auto it = live_.begin(); it != live_.end(); ++it) {  // oldest first
      auto s = it->lock();
      if (s && s->idle()) {
        victim = std::move(s);
        live_.erase(it);  // its close is posted: never picked twice
        break;
      }
    }
  }
  if (!victim) return false;
  victim->close_now();
  return true;
}

std::vector<std::weak_ptr<Closable>> TransportContext::sessions() {
  std::lock_guard lock(mutex_);
  return live_;
}

void TransportContext::close_all() {
  std::vector<std::weak_ptr<Closable>> live;
  {
    std::lock_guard lock(mutex_);
    live.swap(live_);
  }
  for (auto& w : live) {
    if (auto s = w.lock()) s->close_now();
  }
}

struct Server::Impl {
  ServerCore* core = nullptr;
  asio::io_context ioc;
  std::shared_ptr<TransportContext> ctx;
  std::shared_ptr<Listener> listener;
  std::vector<std::thread> threads;
  uint16_t port = 0;
  std::mutex mutex;
  std::condition_variable cv;
  bool stop_requested = false;
  bool stopped = false;
  // Lives from the first wait_for_signal to the end: a second signal must
  // find a handler during the shutdown too.
  std::unique_ptr<asio::signal_set> signals;
};

namespace {

// Polls `done` every 10 ms for up to `seconds`; true when it became true.
template <class F>
bool wait_until(F done, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(0.5); }

std::unique_ptr<Server> Server::start(ServerCore& core, ServerOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->core = &core;
  impl->ctx = std::make_shared<TransportContext>(core);
  impl->ctx->idle_timeout = std::chrono::seconds(options.idle_timeout_s);
  impl->ctx->write_timeout = std::chrono::seconds(options.write_timeout_s);
  impl->ctx->socket_send_buffer = options.socket_send_buffer;
  impl->ctx->header_timeout = std::chrono::seconds(options.header_timeout_s);
  impl->ctx->max_header_bytes = static_cast<size_t>(std::max(1024, options.max_header_bytes));
  impl->ctx->ws_ping_timeout = std::chrono::seconds(options.ws_ping_timeout_s);
  impl->ctx->max_connections = std::max(1, options.max_connections);
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(options.host, ec);
  if (ec) throw Error(Errc::invalid_argument, "--host: '" + options.host + "' is not an IP address");
  impl->listener = std::make_shared<Listener>(impl->ioc, tcp::endpoint(address, options.port), impl->ctx);
  impl->port = impl->listener->port();
  impl->listener->run();
  const int n = std::max(1, options.io_threads);
  for (int i = 0; i < n; ++i) impl->threads.emplace_back([ioc = &impl->ioc] { ioc->run(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

uint16_t Server::port() const { return impl_->port; }

void Server::wait_for_signal(const std::function<bool()>& until) {
  // A signal_set on the server's own context; the waiting thread sleeps on
  // a condition variable so stop() from elsewhere also ends the wait. The
  // first signal asks for a (graceful) stop; the handler then stays armed,
  // and the next signal exits at once.
  if (!impl_->signals) {
    impl_->signals = std::make_unique<asio::signal_set>(impl_->ioc, SIGINT, SIGTERM);
    struct Handler {
      Impl* impl;
      void operator()(boost::system::error_code ec, int sig) const {
        if (ec) return;
        {
          std::lock_guard lock(impl->mutex);
          if (impl->stop_requested) {
            std::fprintf(stderr, "troupe serve: second signal: exiting now\n");
            std::_Exit(128 + sig);
          }
          impl->stop_requested = true;
          impl->cv.notify_all();
        }
        impl->signals->async_wait(*this);
      }
    };
    impl_->signals->async_wait(Handler{impl_.get()});
  }
  {
    std::unique_lock lock(impl_->mutex);
    while (!impl_->stop_requested && !impl_->stopped) {
      impl_->cv.wait_for(lock, std::chrono::milliseconds(100));
      if (until) {
        lock.unlock();
        const bool done = until();
        lock.lock();
        if (done) break;
      }
    }
  }
}

void Server::shutdown(double grace_s) {
  AdmissionControl& admission = impl_->core->admission();
  admission.begin_drain();
  const auto idle = [&] { return admission.in_flight() == 0; };
  if (!wait_until(idle, std::max(0.0, grace_s))) {
    const size_t n = impl_->core->jobs().shutdown_all();
    std::fprintf(stderr, "troupe serve: grace period over: ending %zu requests\n", n);
    // Their final events come back through the pipeline.
    wait_until(idle, 10.0);
  }
  // The last chunks, [DONE] and WebSocket finals go out before the close;
  // a client that reads nothing is not waited for long.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  wait_until([&] { return impl_->ctx->pending_bytes() == 0; }, 2.0);
  // Close every connection while the I/O threads still run, so that the
  // WebSocket close frames (1001) go out, and wait (briefly) for them.
  const std::vector<std::weak_ptr<Closable>> sessions = impl_->ctx->sessions();
  impl_->ctx->close_all();
  wait_until([&] { return std::all_of(sessions.begin(), sessions.end(), [](const auto& w) { return w.expired(); }); },
             1.0);
  stop(0.5);
}

void Server::stop(double drain_s) {
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopped) return;
    impl_->stopped = true;
    impl_->cv.notify_all();
  }
  impl_->listener->stop();
  impl_->ctx->close_all();
  // Closed sessions cancel their requests; give the pipeline a moment to
  // deliver the final events while the I/O threads still run.
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(drain_s);
  while (impl_->core->admission().in_flight() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
  impl_->threads.clear();
  // No I/O thread is left to run the signal handler: give SIGINT and
  // SIGTERM their default action back, so that one more signal still ends
  // the process at once while the pipeline stops.
  if (impl_->signals) {
    boost::system::error_code ec;
    impl_->signals->clear(ec);
  }
}

}  // namespace troupe::net
