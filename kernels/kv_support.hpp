// Which KV cache types each backend's attention reads. One rule, asked both
// by the stage planner (before any device is opened, so a bad --kv-type is
// refused at start even where no GPU is present) and by ModelStage.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memory/kv_type.hpp"

namespace troupe {

// Empty when `backend` ("cpu", "cuda") runs attention over a cache of
// `type` rows of head_dim values; otherwise the one-sentence reason.
std::string kv_type_refusal(std::string_view backend, KvType type, int64_t head_dim);

}  // namespace troupe
