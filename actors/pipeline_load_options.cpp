// pipeline_load_options (declared in pipeline.hpp): how a pipeline's model
// loads, with the context its scheduler will serve.
#include <algorithm>
#include <cstdint>

#include "actors/pipeline.hpp"

namespace troupe {

ModelLoadOptions pipeline_load_options(const PipelineConfig& config) {
  ModelLoadOptions load = config.load;
  if (load.context_length == 0) {
    load.context_length = config.scheduler.context_length;
    // A pool sized in blocks caps the context (one sized in bytes is only
    // known once the model's KV row size is).
    if (config.kv_memory_bytes == 0 && config.n_kv_blocks >= 1 && config.kv_block_size >= 1) {
      load.context_length = std::min<int64_t>(load.context_length, int64_t{config.n_kv_blocks} * config.kv_block_size);
    }
  }
  return load;
}

}  // namespace troupe
