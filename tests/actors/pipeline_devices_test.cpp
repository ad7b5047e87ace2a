// Devices per stage in the actor pipeline: topologies name them (and
// `device`, `gpu_layers`, `remote` at the top), start() refuses a device it
// cannot open with one sentence and builds no actor, and, where a GPU is
// usable, a cpu -> cuda chain and an all-GPU chain give the CPU's greedy
// tokens (the *Cuda* tests; they skip, saying why, without a GPU).
#include <gtest/gtest.h>

#include "actors/pipeline_config.hpp"
#include "actors/pipeline_extensions.hpp"
#include "core/error.hpp"
#include "model/device.hpp"
#include "pipeline_test_util.hpp"

namespace troupe {
namespace {

TEST(PipelineDevices, TopologyNamesDevicesAndRemotes) {
  const PipelineConfig c = parse_pipeline_config(R"({
    "stages": [{"layers": [0, 16], "threads": 4}, {"layers": [16, -1], "device": "cuda:0"},
               {"layers": [20, -1], "remote": "10.0.0.2:7001"}],
    "remote": {"secret": "s3", "step_timeout_ms": 1500, "hello_timeout_ms": 900,
               "tls_cert": "c.pem", "tls_key": "k.pem", "tls_ca": "ca.pem"},
    "device": "cuda:1", "gpu_layers": 8
  })");
  ASSERT_EQ(c.stages.size(), 3u);
  EXPECT_EQ(c.stages[0].device, "cpu");
  EXPECT_EQ(c.stages[1].device, "cuda:0");
  EXPECT_EQ(c.stages[2].remote, "10.0.0.2:7001");
  EXPECT_EQ(c.device, "cuda:1");
  EXPECT_EQ(c.gpu_layers, 8);
  EXPECT_EQ(c.remote.secret, "s3");
  EXPECT_EQ(c.remote.step_timeout_ms, 1500);
  EXPECT_EQ(c.remote.hello_timeout_ms, 900);
  EXPECT_EQ(c.remote.tls_ca, "ca.pem");
  EXPECT_THROW(parse_pipeline_config(R"({"stages": [{"layers": [0, -1], "gpu": 1}]})"), Error);
  EXPECT_THROW(parse_pipeline_config(R"({"remote": {"secrt": "x"}})"), Error);
  EXPECT_THROW(parse_pipeline_config(R"({"remote": {"step_timeout_ms": 0}})"), Error);
}

using test::gpu_usable;
using test::start_error;

TEST(PipelineDevices, UnknownDeviceIsRefusedNamingTheStage) {
  PipelineConfig cfg = test::stories_config(test::split(2));
  cfg.stages[1].device = "tpu:0";
  const std::string e = start_error(cfg);
  EXPECT_NE(e.find("invalid_argument: PipelineConfig: stages[1].device: unknown device 'tpu:0'"), std::string::npos)
      << e;
}

TEST(PipelineDevices, CudaWithoutAGpuIsRefusedAtStart) {
  std::string why;
  if (gpu_usable(&why)) GTEST_SKIP() << "this machine has a usable GPU";
  PipelineConfig cfg = test::stories_config(test::split(2));
  cfg.stages[1].device = "cuda:0";
  const std::string e = start_error(cfg);
  EXPECT_EQ(e.rfind("unsupported: device cuda:0: ", 0), 0u) << e;
  cfg = test::stories_config({});
  cfg.gpu_layers = 2;
  EXPECT_EQ(start_error(cfg).rfind("unsupported: device cuda:0: ", 0), 0u);
}

TEST(PipelineDevices, AFailedDeviceTakesItsStageDownAndFailsFast) {
  // What a CUDA error does (CudaBackend throws Errc::unavailable: the
  // context is unusable from then on), injected on the CPU: the step's
  // requests fail with it, the stage reports itself down, and every later
  // step fails at once instead of waiting.
  PipelineExtensions ext;
  ext.before_stage_step = [](int32_t stage, uint64_t step) {
    if (stage == 1 && step == 3) throw Error(Errc::unavailable, "cudaErrorIllegalAddress (injected)");
  };
  auto p = Pipeline::start(test::stories_config(test::split(2)), ext);
  EXPECT_TRUE(p->stages_up());
  GenerateParams params = test::greedy(40);
  params.ignore_eos = true;
  auto first = p->generate(test::stories_tokenizer().encode("Once upon a time", true, false), params);
  const Completion c = test::wait_for(first);
  EXPECT_EQ(c.final.reason, EndReason::error);
  EXPECT_EQ(c.final.error_code, Errc::unavailable);
  EXPECT_NE(c.final.error_message.find("cudaErrorIllegalAddress (injected)"), std::string::npos)
      << c.final.error_message;
  EXPECT_FALSE(p->stages_up());
  const std::vector<StageHealth> h = p->stage_health();
  ASSERT_EQ(h.size(), 2u);
  EXPECT_TRUE(h[0].up);
  EXPECT_FALSE(h[1].up);
  EXPECT_EQ(h[1].where, "cpu");
  EXPECT_NE(h[1].error.find("injected"), std::string::npos);
  auto later = p->generate(test::stories_tokenizer().encode("Hello", true, false), test::greedy(4));
  const Completion d = test::wait_for(later);
  EXPECT_EQ(d.final.error_code, Errc::unavailable);
  EXPECT_NE(d.final.error_message.find("failed earlier"), std::string::npos) << d.final.error_message;
  EXPECT_EQ(p->kv_snapshot().n_used, 0);
}

// -- with a GPU -----------------------------------------------------------------

class PipelineCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!gpu_usable(&why)) GTEST_SKIP() << "no usable CUDA GPU: " << why;
  }

  static void expect_cpu_tokens(PipelineConfig cfg) {
    auto p = Pipeline::start(std::move(cfg));
    test::expect_near_cpu_tokens(*p, test::make_cases(16));
    EXPECT_TRUE(p->stages_up());
    EXPECT_EQ(p->kv_snapshot().n_used, 0);
  }
};

TEST_F(PipelineCuda, WholeModelOnTheGpu) {
  PipelineConfig cfg = test::stories_config({});
  cfg.device = "cuda:0";
  expect_cpu_tokens(cfg);
}

TEST_F(PipelineCuda, CpuThenCudaChain) {
  PipelineConfig cfg = test::stories_config(test::split(2));
  cfg.stages[1].device = "cuda:0";
  expect_cpu_tokens(cfg);
}

TEST_F(PipelineCuda, GpuLayersSplit) {
  PipelineConfig cfg = test::stories_config({});
  cfg.gpu_layers = 3;
  expect_cpu_tokens(cfg);
}

TEST_F(PipelineCuda, TooLittleDeviceMemoryIsRefusedWithTheBytes) {
  PipelineConfig cfg = test::stories_config({});
  cfg.device = "cuda:0";
  // 8M pages of 16 tokens x 5 layers x K and V x kv_dim 32 floats: ~170 GB
  // of KV, past a 141 GB H200, while the host's block table stays ~300 MB.
  cfg.n_kv_blocks = 8 << 20;
  const std::string e = start_error(cfg);
  EXPECT_NE(e.find("out_of_memory: device cuda:0"), std::string::npos) << e;
  EXPECT_NE(e.find("free but the stage needs"), std::string::npos) << e;
}

TEST_F(PipelineCuda, MissingGpuIndexIsRefused) {
  PipelineConfig cfg = test::stories_config({});
  cfg.device = "cuda:63";
  const std::string e = start_error(cfg);
  EXPECT_NE(e.find("device cuda:63 does not exist"), std::string::npos) << e;
}

}  // namespace
}  // namespace troupe
