// Stage planning: layer coverage, devices, footprints and hand-offs.
#include "model/stage_plan.hpp"

#include <limits>

#include "core/error.hpp"
#include "kernels/kv_support.hpp"

namespace troupe {
namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw Error(Errc::invalid_argument, what);
}

}  // namespace

const char* to_string(HandOff h) {
  switch (h) {
    case HandOff::none: return "none";
    case HandOff::host: return "host";
    case HandOff::pinned: return "pinned";
    case HandOff::wire: return "wire";
  }
  return "unknown";
}

std::vector<StagePlacement> split_gpu_layers(int64_t n_layer, int64_t gpu_layers, int threads, const std::string& gpu) {
  if (gpu_layers <= 0) return {{.first_layer = 0, .last_layer = n_layer, .device = "cpu", .threads = threads}};
  if (gpu_layers >= n_layer) return {{.first_layer = 0, .last_layer = n_layer, .device = gpu, .threads = threads}};
  const int64_t split = n_layer - gpu_layers;
  return {{.first_layer = 0, .last_layer = split, .device = "cpu", .threads = threads},
          {.first_layer = split, .last_layer = n_layer, .device = gpu, .threads = threads}};
}

int32_t kv_blocks_for_budget(const ModelConfig& c, KvType type, int64_t block_size, int64_t budget_bytes) {
  const int64_t token = stage_kv_token_bytes(c, 0, c.n_layer, type);
  const int64_t block = block_size * token;
  require(block_size > 0 && budget_bytes >= block,
          "a KV memory budget of " + format_bytes(budget_bytes) + " holds no " + std::string(kv_type_name(type)) +
              " block of " + std::to_string(block_size) + " tokens (" + format_bytes(block) + " for this model)");
  return static_cast<int32_t>(std::min<int64_t>(budget_bytes / block, std::numeric_limits<int32_t>::max()));
}

std::vector<PlannedStage> plan_stages(const Model& model, std::span<const StagePlacement> stages,
                                      const StageOptions& limits) {
  const ModelConfig& c = model.config();
  const int64_t n_layer = c.n_layer;
  std::vector<StagePlacement> wanted(stages.begin(), stages.end());
  if (wanted.empty()) wanted.push_back({.first_layer = 0, .last_layer = n_layer});

  std::vector<PlannedStage> plan;
  int64_t expect = 0;
  for (size_t i = 0; i < wanted.size(); ++i) {
    const StagePlacement& s = wanted[i];
    const std::string name = "stages[" + std::to_string(i) + "]";
    const int64_t last = s.last_layer < 0 ? n_layer : s.last_layer;
    require(s.first_layer == expect, name + " starts at layer " + std::to_string(s.first_layer) + ", expected " +
                                         std::to_string(expect) + " (stages must cover the layers in order)");
    require(last > s.first_layer && last <= n_layer, name + " has layers [" + std::to_string(s.first_layer) + ", " +
                                                         std::to_string(last) + ") but the model has " +
                                                         std::to_string(n_layer));
    require(s.threads >= 0, name + ".threads must not be negative");
    Device device;
    try {
      device = parse_device(s.device);
    } catch (const Error& e) {
      throw Error(Errc::invalid_argument, name + ".device: " + e.what());
    }
    if (s.remote.empty()) {
      const std::string why = kv_type_refusal(device.is_cuda() ? "cuda" : "cpu", limits.kv_type, c.head_dim);
      if (!why.empty()) throw Error(Errc::unsupported, name + " on " + device.str() + ": " + why);
      const std::string layers_why =
          stage_layers_refusal(device.is_cuda() ? "cuda" : "cpu", c, s.first_layer, last, limits.kv_type);
      if (!layers_why.empty()) throw Error(Errc::unsupported, name + " on " + device.str() + ": " + layers_why);
    }
    StageOptions o = limits;
    o.first_layer = s.first_layer;
    o.last_layer = last;
    plan.push_back({.first_layer = s.first_layer,
                    .last_layer = last,
                    .device = device,
                    .threads = s.threads,
                    .remote = s.remote,
                    .footprint = s.remote.empty() ? ModelStage::footprint(model, o, device.is_cuda()) : StageFootprint{}});
    expect = last;
  }
  require(expect == n_layer,
          "the stages end at layer " + std::to_string(expect) + " but the model has " + std::to_string(n_layer));

  for (size_t i = 0; i < plan.size(); ++i) {
    PlannedStage& p = plan[i];
    const bool last = i + 1 == plan.size();
    const bool next_gpu = !last && plan[i + 1].device.is_cuda() && !plan[i + 1].is_remote();
    if (p.is_remote()) {
      p.output = HandOff::wire;
    } else {
      p.output = p.device.is_cuda() || next_gpu ? HandOff::pinned : HandOff::host;
    }
    p.input = i == 0 ? HandOff::none : p.is_remote() ? HandOff::wire : plan[i - 1].output;
    const int64_t floats = last ? limits.max_seqs * c.n_vocab : limits.max_tokens * c.n_embd;
    p.output_bytes = static_cast<size_t>(floats) * sizeof(float);
  }
  return plan;
}

}  // namespace troupe
