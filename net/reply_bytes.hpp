// HTTP/1.1 reply bytes written by hand: a status line, headers and a body,
// or the head of a chunked reply and its chunks. Small and exact, and it
// keeps Beast's serializer templates out of the build.
#pragma once

#include <string>
#include <string_view>

#include "net/http_types.hpp"

namespace troupe::net {

// The bytes of a reply: status line, headers (Server, Content-Type, the
// reply's own, Connection), and the body with its Content-Length; or, with
// `chunked`, only the head of a reply whose body follows in chunks. HTTP/1.0
// (version 10) gets no chunking: the body then runs until the connection
// closes, so keep_alive is ignored for it.
std::string serialize_reply(const HttpReply& reply, unsigned version, bool keep_alive, bool chunked);

// One chunk of a chunked body ("<hex size>\r\n<data>\r\n"); empty data gives
// an empty string (a zero-size chunk would end the body).
std::string chunk_frame(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// The reason phrase of a status code ("Not Found").
std::string_view reason_phrase(int status);

}  // namespace troupe::net
