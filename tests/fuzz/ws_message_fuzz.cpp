// libFuzzer target for WebSocket client messages (parse_ws_message in
// net/request_parser.cpp): any bytes as one text message. A message is a
// generate or a cancel with a 1..128-byte id, or an ApiError (400) that
// names the id when there was a usable one; nothing else.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/request_limits_check.hpp"

using namespace troupe::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string id;
  try {
    const auto m = troupe::net::parse_ws_message(as_text(data, size), kFuzzLimits, &id);
    check(!m.id.empty() && m.id.size() <= 128 && id == m.id);
    if (m.kind == troupe::net::WsClientMessage::Kind::generate) check_limits(m.request, kFuzzLimits);
  } catch (const troupe::net::ApiError& e) {
    check_error(e);
    check(id.size() <= 128);
  }
  return 0;
}
