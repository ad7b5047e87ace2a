// Stage planning without a GPU: devices parse (and bad ones are refused
// with a sentence), --gpu-layers splits as llama.cpp's -ngl does, and a
// cpu -> cuda topology is planned with its layer split, device footprints
// and pinned hand-off buffers. Opening a CUDA device here fails cleanly.
#include "model/stage_plan.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.hpp"
#include "model/device.hpp"
#include "model/model_identity.hpp"
#ifdef TROUPE_HAVE_CUDA
#include "kernels/cuda_backend.hpp"
#endif

namespace troupe {
namespace {

const std::shared_ptr<const Model>& shared_stories() {
  static const auto m = Model::load(std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf");
  return m;
}

constexpr StageOptions kLimits{.max_tokens = 96, .max_seqs = 16, .n_kv_blocks = 64, .kv_block_size = 16};

TEST(Device, ParsesTheAcceptedForms) {
  EXPECT_EQ(parse_device("cpu"), Device{});
  EXPECT_EQ(parse_device("cuda"), (Device{.kind = DeviceKind::cuda, .index = 0}));
  EXPECT_EQ(parse_device("cuda:3"), (Device{.kind = DeviceKind::cuda, .index = 3}));
  EXPECT_EQ(parse_device("cuda:3").str(), "cuda:3");
  EXPECT_EQ(parse_device("cpu").str(), "cpu");
}

TEST(Device, RefusesUnknownDevicesWithASentence) {
  for (const char* bad : {"", "gpu0", "cuda:", "cuda:-1", "cuda:1x", "tpu", "CPU"}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("use cpu, cuda or cuda:N"), std::string::npos) << e.what();
    }
  }
}

TEST(Device, CudaWithoutAGpuIsAClearError) {
#ifdef TROUPE_HAVE_CUDA
  if (cuda_available()) GTEST_SKIP() << "this machine has a usable GPU: the no-GPU error cannot happen here";
#endif
  try {
    open_backend(parse_device("cuda:0"), 1);
    ADD_FAILURE() << "opened a CUDA backend without a GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("device cuda:0: ", 0), 0u) << what;
  }
}

TEST(StagePlan, GpuLayersSplitsOffTheLastLayers) {
  const auto none = split_gpu_layers(30, 0, 2);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_EQ(none[0].device, "cpu");
  const auto all = split_gpu_layers(30, 99, 2, "cuda:1");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].device, "cuda:1");
  EXPECT_EQ(all[0].last_layer, 30);
  const auto some = split_gpu_layers(30, 12, 2);
  ASSERT_EQ(some.size(), 2u);
  EXPECT_EQ(some[0].device, "cpu");
  EXPECT_EQ(some[0].first_layer, 0);
  EXPECT_EQ(some[0].last_layer, 18);
  EXPECT_EQ(some[0].threads, 2);
  EXPECT_EQ(some[1].device, "cuda:0");
  EXPECT_EQ(some[1].first_layer, 18);
  EXPECT_EQ(some[1].last_layer, 30);
}

TEST(StagePlan, CpuThenCudaChain) {
  const Model& m = *shared_stories();
  const int64_t n_layer = m.config().n_layer;
  const std::vector<StagePlacement> want = split_gpu_layers(n_layer, 2, 1);
  const std::vector<PlannedStage> plan = plan_stages(m, want, kLimits);
  ASSERT_EQ(plan.size(), 2u);
  const PlannedStage& cpu = plan[0];
  const PlannedStage& gpu = plan[1];
  EXPECT_EQ(cpu.device, Device{});
  EXPECT_EQ(cpu.first_layer, 0);
  EXPECT_EQ(cpu.last_layer, n_layer - 2);
  EXPECT_EQ(gpu.device, (Device{.kind = DeviceKind::cuda, .index = 0}));
  EXPECT_EQ(gpu.first_layer, n_layer - 2);
  EXPECT_EQ(gpu.last_layer, n_layer);
  // The CPU uses the mapped weights in place; the GPU gets copies of its layers and the head.
  EXPECT_EQ(cpu.footprint.weight_bytes, 0u);
  EXPECT_GT(gpu.footprint.weight_bytes, 0u);
  // KV: 2 (K, V) x layers x blocks x block_size x kv_dim floats.
  const size_t kv_layer = 2u * 64 * 16 * static_cast<size_t>(m.config().kv_dim()) * sizeof(float);
  EXPECT_EQ(cpu.footprint.kv_bytes, static_cast<size_t>(n_layer - 2) * kv_layer);
  EXPECT_EQ(gpu.footprint.kv_bytes, 2 * kv_layer);
  EXPECT_GT(gpu.footprint.arena_bytes, 0u);
  // The boundary is pinned on both sides; logits come back pinned too.
  EXPECT_EQ(cpu.input, HandOff::none);
  EXPECT_EQ(cpu.output, HandOff::pinned);
  EXPECT_EQ(cpu.output_bytes, static_cast<size_t>(96 * m.config().n_embd) * sizeof(float));
  EXPECT_EQ(gpu.input, HandOff::pinned);
  EXPECT_EQ(gpu.output, HandOff::pinned);
  EXPECT_EQ(gpu.output_bytes, static_cast<size_t>(16 * m.config().n_vocab) * sizeof(float));
}

TEST(StagePlan, AllCpuStaysInPlainMemoryAndRemoteGoesOnTheWire) {
  const Model& m = *shared_stories();
  const std::vector<StagePlacement> want{{.first_layer = 0, .last_layer = 2, .threads = 1},
                                         {.first_layer = 2, .last_layer = -1, .threads = 1, .remote = "127.0.0.1:7001"}};
  const std::vector<PlannedStage> plan = plan_stages(m, want, kLimits);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].output, HandOff::host);
  EXPECT_EQ(plan[1].input, HandOff::wire);
  EXPECT_EQ(plan[1].output, HandOff::wire);
  EXPECT_EQ(plan[1].footprint.kv_bytes, 0u);  // the worker's, not this process's
}

TEST(StagePlan, RefusesGapsOverlapsAndBadDevicesNamingTheStage) {
  const Model& m = *shared_stories();
  auto message = [&](std::vector<StagePlacement> want) {
    try {
      plan_stages(m, want, kLimits);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({{.first_layer = 1, .last_layer = -1}}).find("stages[0] starts at layer 1"), std::string::npos);
  EXPECT_NE(message({{.first_layer = 0, .last_layer = 2}, {.first_layer = 3, .last_layer = -1}}).find("stages[1]"),
            std::string::npos);
  EXPECT_NE(message({{.first_layer = 0, .last_layer = 2}}).find("the stages end at layer 2"), std::string::npos);
  EXPECT_NE(message({{.first_layer = 0, .last_layer = -1, .device = "cuda:x"}}).find("stages[0].device: unknown device"),
            std::string::npos);
}

TEST(ModelIdentity, StableForOneFileAndDifferentForAnother) {
  const std::string a = model_identity(*shared_stories());
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a, model_identity(*Model::load(std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf")));
  const char* cache = std::getenv("TROUPE_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  const std::string other = (cache ? std::string(cache) : std::string(home ? home : "") + "/.cache/troupe/models") +
                            "/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(other)) GTEST_SKIP() << other << " not found (scripts/setup fetches it)";
  EXPECT_NE(a, model_identity(*Model::load(other)));
}

}  // namespace
}  // namespace troupe
