// The actor a `troupe stage` process publishes: one ModelStage (its layers,
// its device, its KV pages) serving the head that opened the current
// session. Spawned `caf::detached` (a forward pass blocks). A head that goes
// away leaves it waiting for the next hello; a new hello ends the old
// session, so a late step of a dead head is refused, never run.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "actors/stage_handshake.hpp"
#include "memory/kv_type.hpp"
#include "model/model.hpp"

namespace troupe {

struct StageWorkerOptions {
  std::shared_ptr<const Model> model;
  int64_t first_layer = 0;
  int64_t last_layer = -1;       // -1: the model's last layer
  std::string device = "cpu";
  int threads = 0;               // CPU kernel threads (0: all hardware threads)
  int32_t kv_blocks = 512;       // must equal the head's
  int32_t kv_block_size = 16;
  KvType kv_type = KvType::f32;  // must equal the head's
  int64_t max_tokens = 512;      // at least the head's max_tokens_per_step
  int64_t max_seqs = 64;         // at least the head's max_batch_size
  // Recurrent-state slots (models with recurrent layers): at least the
  // sequences the head runs at once, its max_batch_size times its engines.
  // 0: 2 max_seqs (a head of two stages).
  int64_t state_slots = 0;
  // A last stage of an embedding pipeline (`--embedding`): it returns
  // normed hidden rows where it would return logits. Must equal the head's.
  bool embedding = false;
  std::string secret;            // empty: none required
  uint32_t wire_version = kStageWireVersion;  // tests pose as another version
  std::function<void(const std::string&)> log;  // one line per session event; may be empty
};

// Opens the device and builds the stage (errors as Pipeline::start's: no
// GPU, too little memory, bad layers), then spawns the worker. `facts`
// receives what the worker tells heads about itself.
stage_worker_actor spawn_stage_worker(caf::actor_system& system, const StageWorkerOptions& options,
                                      StageFacts* facts = nullptr);

}  // namespace troupe
