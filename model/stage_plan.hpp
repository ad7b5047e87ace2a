// Plans a chain of stages before anything is allocated: which layers run on
// which device, what each stage will allocate there, and how hidden states
// cross each boundary. The actor pipeline and `troupe generate` build their
// stages from the same plan, and the plan is testable without a GPU.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/device.hpp"
#include "model/model.hpp"
#include "model/model_stage.hpp"

namespace troupe {

// One stage as a user asks for it (a topology entry, a flag).
struct StagePlacement {
  int64_t first_layer = 0;
  int64_t last_layer = -1;  // exclusive; -1: to the model's last layer
  std::string device = "cpu";
  int threads = 0;          // CPU kernel threads (0: all hardware threads); ignored on a GPU
  std::string remote;       // "host:port" of a `troupe stage` worker holding these layers; empty: in this process
};

// `--gpu-layers N` (llama.cpp's -ngl): the last N layers, and with them the
// output head, on `gpu`; the layers before them on the CPU with `threads`.
// N <= 0: all on the CPU; N >= n_layer: all on the GPU.
std::vector<StagePlacement> split_gpu_layers(int64_t n_layer, int64_t gpu_layers, int threads,
                                             const std::string& gpu = "cuda:0");

// How a tensor crosses between a stage and the host every step.
enum class HandOff {
  none,    // nothing crosses (the first stage's input is token ids)
  host,    // plain host memory: both sides are CPU stages
  pinned,  // page-locked host memory, copied by DMA on the GPU stage's stream
  wire,    // serialized to or from another process (a remote stage)
};
const char* to_string(HandOff h);

struct PlannedStage {
  int64_t first_layer = 0;
  int64_t last_layer = 0;
  Device device;
  int threads = 0;
  std::string remote;  // as in StagePlacement: nothing is allocated here when set
  StageFootprint footprint;  // what the stage allocates on its device (zero for a remote stage)
  // Hidden states [max_tokens, n_embd] in (none for the first stage), and
  // the stage's output: hidden states to the next stage, or logits
  // [max_seqs, n_vocab] for the sampler (last stage). A boundary is pinned
  // when either side is a GPU stage.
  HandOff input = HandOff::none;
  HandOff output = HandOff::host;
  size_t output_bytes = 0;  // the largest output buffer of one step

  bool is_remote() const { return !remote.empty(); }
};

// KV pages a byte budget buys (`--kv-memory`): every stage keeps n_blocks
// pages for its own layers, so one block costs block_size tokens times the
// whole model's KV bytes per token in `type` (q8_0: about 3.8x the blocks of
// f32). Throws Error(invalid_argument) when the budget holds no block.
int32_t kv_blocks_for_budget(const ModelConfig& c, KvType type, int64_t block_size, int64_t budget_bytes);

// Resolves and checks placements against the model: the stages cover
// [0, n_layer) in order without gaps, devices parse. `limits` gives the step
// size and KV geometry (its layer fields are ignored). Throws
// Error(invalid_argument) naming the stage at fault, Error(unsupported) for
// a KV type a stage's device cannot run (kernels/kv_support.hpp). An empty list is one
// CPU stage with every layer.
std::vector<PlannedStage> plan_stages(const Model& model, std::span<const StagePlacement> stages,
                                      const StageOptions& limits);

}  // namespace troupe
