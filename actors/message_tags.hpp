// What a traced span says about the message it handled: the message's type
// name, its step, and the request ids it carries, read from the message
// before the handler runs (handlers may move its contents away).
#pragma once

#include <caf/type_erased_tuple.hpp>

#include <cstdint>
#include <vector>

#include "telemetry/trace_ring.hpp"

namespace troupe {

// `ids` is scratch space the returned tags point into.
SpanTags tag_message(const caf::type_erased_tuple& content, std::vector<int64_t>& ids);

}  // namespace troupe
