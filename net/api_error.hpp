// Errors answered to one client in OpenAI's shape
// ({"error": {"message", "type", "param", "code"}}), with the HTTP status
// they travel with. Thrown by the request parser and the routes; the
// transport never sees a troupe::Error.
#pragma once

#include <stdexcept>
#include <string>

#include "core/error.hpp"

namespace troupe::net {

class ApiError : public std::runtime_error {
 public:
  // type empty: derived from the status (invalid_request_error for 4xx,
  // server_error for 5xx, ...). param and code empty: null in the body.
  ApiError(int status, const std::string& message, std::string param = {}, std::string code = {},
           std::string type = {});

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  // Seconds a client should wait before retrying (429, 503); 0: none.
  int retry_after() const { return retry_after_; }
  ApiError& with_retry_after(int seconds) {
    retry_after_ = seconds;
    return *this;
  }

 private:
  int status_;
  std::string param_;
  std::string code_;
  std::string type_;
  int retry_after_ = 0;
};

// A 400 naming the request field at fault ("messages[1].content").
ApiError invalid_field(const std::string& param, const std::string& message, const std::string& code = "invalid_value");

// The status and error a pipeline error kind turns into (a request the
// engine refused or failed).
ApiError api_error_from(Errc code, const std::string& message, const std::string& param = {});

// {"error": {...}} as JSON text.
std::string error_body(const ApiError& e);

}  // namespace troupe::net
