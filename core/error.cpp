// Names for error kinds, used in logs and in API error bodies.
#include "core/error.hpp"

namespace troupe {

const char* to_string(Errc e) {
  switch (e) {
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::io: return "io";
    case Errc::bad_format: return "bad_format";
    case Errc::unsupported: return "unsupported";
    case Errc::out_of_memory: return "out_of_memory";
    case Errc::cancelled: return "cancelled";
    case Errc::unavailable: return "unavailable";
    case Errc::internal: return "internal";
    case Errc::too_long: return "too_long";
    case Errc::overloaded: return "overloaded";
  }
  return "unknown";
}

}  // namespace troupe
