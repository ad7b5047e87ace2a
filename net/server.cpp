// The listener (accept loop, one strand per connection, as in Beast's
// advanced server example), the I/O threads, signal handling and orderly
// shutdown.
#include "net/server.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
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
      start_http_session(std::move(socket), ctx_);
    } else if (ec != asio::error::connection_aborted) {
      // Out of file descriptors, say: log, and keep accepting after a pause
      // rather than spinning.
      std::fprintf(stderr, "troupe serve: accept: %s\n", ec.message().c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    do_accept();
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
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(0.5); }

std::unique_ptr<Server> Server::start(ServerCore& core, ServerOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->core = &core;
  impl->ctx = std::make_shared<TransportContext>(core);
  impl->ctx->idle_timeout = std::chrono::seconds(options.idle_timeout_s);
  impl->ctx->write_timeout = std::chrono::seconds(options.write_timeout_s);
  impl->ctx->socket_send_buffer = options.socket_send_buffer;
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
  // a condition variable so stop() from elsewhere also ends the wait.
  asio::signal_set signals(impl_->ioc, SIGINT, SIGTERM);
  signals.async_wait([impl = impl_.get()](boost::system::error_code ec, int) {
    if (ec) return;
    std::lock_guard lock(impl->mutex);
    impl->stop_requested = true;
    impl->cv.notify_all();
  });
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
  boost::system::error_code ec;
  signals.cancel(ec);
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
}

}  // namespace troupe::net
