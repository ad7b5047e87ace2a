// Names of request end reasons, as logs and the OpenAI-style API spell them.
#include "actors/request_types.hpp"

namespace troupe {

const char* to_string(EndReason r) {
  switch (r) {
    case EndReason::stop: return "stop";
    case EndReason::length: return "length";
    case EndReason::cancelled: return "cancelled";
    case EndReason::error: return "error";
  }
  return "unknown";
}

}  // namespace troupe
