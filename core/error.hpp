// Errors as values with a kind, so callers (a request, the server) can decide
// what to do; the message names the file, tensor or field at fault.
#pragma once

#include <stdexcept>
#include <string>
#include <cstdint>
#include <utility>

namespace troupe {

enum class Errc : uint8_t {
  invalid_argument,  // a caller passed something malformed
  io,                // a file could not be opened, mapped or read
  bad_format,        // a model or tokenizer file is structurally wrong
  unsupported,       // well-formed, but something Troupe does not implement
  out_of_memory,     // a pool (KV blocks, arena) cannot hold the request
  cancelled,
  unavailable,       // a stage cannot serve now: a device error, a remote stage lost or not answering
  internal,
  too_long,          // a prompt (plus the tokens asked for) that the context cannot hold
  overloaded,        // a queue is full now: the same request may succeed later
};

const char* to_string(Errc e);

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& what) : std::runtime_error(what), code_(code) {}
  Errc code() const { return code_; }

 private:
  Errc code_;
};

// A request the engine refuses, naming the request field at fault
// ("prompt", "messages", "max_tokens", "top_p", "prompt[3]"), so that every
// front end (HTTP, WebSocket, C++) reports the same rule the same way.
class RequestError : public Error {
 public:
  RequestError(Errc code, std::string param, const std::string& what) : Error(code, what), param_(std::move(param)) {}
  const std::string& param() const { return param_; }

 private:
  std::string param_;
};

}  // namespace troupe
