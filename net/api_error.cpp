// ApiError, the pipeline error kinds' HTTP statuses, and the OpenAI error
// body.
#include "net/api_error.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace troupe::net {
namespace {

boost::json::value text_or_null(const std::string& s) {
  if (s.empty()) return nullptr;
  return boost::json::string_view(s.data(), s.size());
}

std::string type_for(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

ApiError::ApiError(int status, const std::string& message, std::string param, std::string code, std::string type)
    : std::runtime_error(message),
      status_(status),
      param_(std::move(param)),
      code_(std::move(code)),
      type_(type.empty() ? type_for(status) : std::move(type)) {}

ApiError invalid_field(const std::string& param, const std::string& message, const std::string& code) {
  return ApiError(400, message, param, code);
}

ApiError api_error_from(Errc code, const std::string& message, const std::string& param) {
  switch (code) {
    case Errc::invalid_argument:
      return ApiError(400, message, param, param.empty() ? "invalid_request" : "invalid_value");
    case Errc::unsupported:
      return ApiError(400, message, param, "unsupported");
    case Errc::too_long:
      return ApiError(400, message, param, "context_length_exceeded");
    // The pipeline's own queue or KV pool is full: overload, not a bug.
    case Errc::overloaded:
    case Errc::out_of_memory:
      return ApiError(429, message, param, "overloaded").with_retry_after(1);
    case Errc::cancelled:
      return ApiError(503, message, param, "cancelled").with_retry_after(1);
    // A stage is down (device error, remote worker lost): retry later.
    case Errc::unavailable:
      return ApiError(503, message, param, "stage_unavailable").with_retry_after(2);
    case Errc::io:
    case Errc::bad_format:
    case Errc::internal:
      break;
  }
  return ApiError(500, message, param, "internal_error");
}

std::string error_body(const ApiError& e) {
  boost::json::object err;
  err["message"] = boost::json::string_view(e.what());
  err["type"] = text_or_null(e.type());
  err["param"] = text_or_null(e.param());
  err["code"] = text_or_null(e.code());
  boost::json::object root;
  root["error"] = std::move(err);
  return boost::json::serialize(root);
}

}  // namespace troupe::net
