// Beast's asynchronous operations driven one at a time on a private
// io_context: that reads like blocking code, yet every step honours the
// deadline (beast::tcp_stream only times out asynchronous operations).
// The body is read through a buffer_body, so pieces reach the caller as soon
// as the socket delivers them, chunked or not.
#include "net/http_client.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace troupe::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr size_t kHeaderLimit = 64 << 10;

class Exchange {
 public:
  explicit Exchange(const HttpClientRequest& req) : req_(req) {
    const double s = std::isfinite(req.timeout_s) && req.timeout_s > 0 ? std::min(req.timeout_s, 1e7) : 1e7;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
  }

  ~Exchange() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  HttpClientResult run(const HttpClientHandlers& handlers) {
    HttpClientResult result;
    if (auto err = connect(); !err.empty()) return fail(result, err);
    if (auto err = send(); !err.empty()) return fail(result, err);

    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);  // a stream is as long as the generation
    parser.header_limit(kHeaderLimit);
    beast::flat_buffer buffer;
    stream_.expires_at(deadline_);
    beast::error_code ec = wait([&](auto handler) { http::async_read_header(stream_, buffer, parser, handler); });
    if (ec) return fail(result, "reading the response head: " + describe(ec));
    result.status = static_cast<int>(parser.get().result_int());
    if (handlers.on_head) handlers.on_head(result.status);

    std::array<char, 16 << 10> piece;
    while (!parser.is_done()) {
      parser.get().body().data = piece.data();
      parser.get().body().size = piece.size();
      stream_.expires_at(deadline_);
      ec = wait([&](auto handler) { http::async_read_some(stream_, buffer, parser, handler); });
      if (ec == http::error::need_buffer) ec = {};  // `piece` is full: hand it over, read on
      const size_t n = piece.size() - parser.get().body().size;
      if (n > 0 && handlers.on_body && !handlers.on_body(std::string_view(piece.data(), n))) return result;
      if (ec) return fail(result, "reading the response body: " + describe(ec));
    }
    await_close();
    return result;
  }

 private:
  std::string connect() {
    tcp::resolver resolver(ioc_);
    beast::error_code ec;
    const auto endpoints = resolver.resolve(req_.host, std::to_string(req_.port), ec);
    if (ec) return "resolving " + req_.host + ": " + ec.message();
    stream_.expires_at(deadline_);
    ec = wait([&](auto handler) { stream_.async_connect(endpoints, handler); });
    if (ec) return "connecting: " + describe(ec);
    return {};
  }

  std::string send() {
    http::request<http::string_body> msg;
    msg.method_string(req_.method);
    msg.target(req_.target);
    msg.version(11);
    msg.set(http::field::host, req_.host + ":" + std::to_string(req_.port));
    msg.set(http::field::user_agent, "troupe-load-client");
    // One request per connection: the server closes once the reply is out.
    msg.set(http::field::connection, "close");
    if (!req_.api_key.empty()) msg.set(http::field::authorization, "Bearer " + req_.api_key);
    if (!req_.body.empty()) {
      msg.set(http::field::content_type, "application/json");
      msg.body() = req_.body;
    }
    msg.prepare_payload();
    stream_.expires_at(deadline_);
    beast::error_code ec = wait([&](auto handler) { http::async_write(stream_, msg, handler); });
    if (ec) return "sending the request: " + describe(ec);
    return {};
  }

  // We asked for "Connection: close", so the server closes once its reply
  // is out; waiting for that, rather than closing first, keeps a server
  // that watches for clients leaving mid-reply from counting one whose last
  // bytes it had sent but not yet seen written. Bounded, and never an error.
  void await_close() {
    stream_.expires_at(std::min(deadline_, std::chrono::steady_clock::now() + std::chrono::seconds(2)));
    std::array<char, 512> sink;
    while (!wait([&](auto handler) { stream_.async_read_some(asio::buffer(sink), handler); })) {
    }
  }

  // Starts one asynchronous operation and runs the context until it ends.
  template <class Start>
  beast::error_code wait(Start&& start) {
    beast::error_code out = asio::error::would_block;
    start([&out](beast::error_code ec, auto&&...) { out = ec; });
    ioc_.restart();
    ioc_.run();
    return out;
  }

  std::string describe(const beast::error_code& ec) const {
    if (ec == beast::error::timeout) {
      char s[32];
      std::snprintf(s, sizeof s, "%g", req_.timeout_s);
      return std::string("timed out after ") + s + " s";
    }
    return ec.message();
  }

  HttpClientResult& fail(HttpClientResult& r, const std::string& what) const {
    r.error = req_.method + " " + req_.host + ":" + std::to_string(req_.port) + req_.target + ": " + what;
    return r;
  }

  const HttpClientRequest& req_;
  asio::io_context ioc_;
  beast::tcp_stream stream_{ioc_};
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace

HttpClientResult http_call(const HttpClientRequest& req, const HttpClientHandlers& handlers) {
  try {
    Exchange ex(req);
    return ex.run(handlers);
  } catch (const std::exception& e) {
    // Asio reports some setup failures (no file descriptors left) by throwing.
    return HttpClientResult{.error = req.method + " " + req.host + ":" + std::to_string(req.port) + req.target + ": " +
                                     e.what()};
  }
}

HttpClientResult http_call(const HttpClientRequest& req, std::string& body, size_t max_body) {
  body.clear();
  return http_call(req, HttpClientHandlers{.on_body = [&](std::string_view piece) {
                     body.append(piece.substr(0, max_body - body.size()));
                     return body.size() < max_body;
                   }});
}

}  // namespace troupe::net
