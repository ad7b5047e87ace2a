// Internal to net/: the hand-over from an HTTP session to a WebSocket
// session once an upgrade request for /v1/stream has been read and allowed.
#pragma once

#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <memory>

#include "net/transport.hpp"

namespace troupe::net {

void start_ws_session(boost::beast::tcp_stream stream,
                      boost::beast::http::request<boost::beast::http::string_body> upgrade,
                      std::shared_ptr<TransportContext> ctx);

}  // namespace troupe::net
