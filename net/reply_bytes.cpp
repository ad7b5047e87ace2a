// Status lines, headers and chunk framing (RFC 9112).
#include "net/reply_bytes.hpp"

#include <cstdio>

namespace troupe::net {

std::string_view reason_phrase(int status) {
  switch (status) {
    case 101:
      return "Switching Protocols";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 426:
      return "Upgrade Required";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

std::string serialize_reply(const HttpReply& reply, unsigned version, bool keep_alive, bool chunked) {
  const bool http10 = version == 10;
  std::string out;
  out.reserve(256 + (chunked ? 0 : reply.body.size()));
  out += http10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  out += std::to_string(reply.status);
  out += ' ';
  out += reason_phrase(reply.status);
  out += "\r\nServer: troupe\r\n";
  if (!reply.content_type.empty()) out += "Content-Type: " + reply.content_type + "\r\n";
  for (const auto& [name, value] : reply.headers) out += name + ": " + value + "\r\n";
  if (chunked) {
    // HTTP/1.0 has no chunked coding: the body ends when the connection does.
    if (!http10) out += "Transfer-Encoding: chunked\r\n";
  } else {
    out += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
  }
  const bool persist = keep_alive && !(http10 && chunked);
  if (http10) {
    if (persist) out += "Connection: keep-alive\r\n";
  } else if (!persist) {
    out += "Connection: close\r\n";
  }
  out += "\r\n";
  if (!chunked) out += reply.body;
  return out;
}

std::string chunk_frame(std::string_view data) {
  if (data.empty()) return {};
  char size[20];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out;
  out.reserve(static_cast<size_t>(n) + data.size() + 2);
  out.append(size, static_cast<size_t>(n));
  out.append(data);
  out += "\r\n";
  return out;
}

}  // namespace troupe::net
