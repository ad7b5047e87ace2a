#include "net/json_body.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>

namespace troupe::net {
namespace {

template <typename T>
void append_shortest(std::string& out, T x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  out.append(buf, r.ptr);
}

}  // namespace

void append_number(std::string& out, float x) { append_shortest(out, x); }
void append_number(std::string& out, double x) { append_shortest(out, x); }

std::string json_quoted(const std::string& s) { return boost::json::serialize(boost::json::value(s)); }

HttpReply json_reply(int status, std::string body) {
  return HttpReply{.status = status, .content_type = "application/json", .body = std::move(body)};
}

std::string usage_json(int64_t prompt_tokens) {
  return R"("usage":{"prompt_tokens":)" + std::to_string(prompt_tokens) + R"(,"total_tokens":)" +
         std::to_string(prompt_tokens) + "}";
}

}  // namespace troupe::net
