// The vision tower on the CUDA backend against the CPU's, on the tiny LLaVA
// fixtures (tests/fixtures/hf/llava_*): the same pixel values give the same
// projected features within f32 rounding (quick GELU, LayerNorm, attention
// both ways over every patch). Skips, saying why, without a GPU.
#include "vision/vision_encoder.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cuda_test_util.hpp"
#include "kernels/cpu_backend.hpp"
#include "tests/vision/llava_fixture.hpp"

namespace troupe {
namespace {

class CudaVision : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaVision, FeaturesMatchTheCpu) {
  TROUPE_REQUIRE_GPU();
  const auto model = vision::VisionModel::load(test::hf_fixture(GetParam()));
  ASSERT_NE(model, nullptr);
  const nlohmann::json ref = test::hf_reference(GetParam());
  const auto pixels = ref["cases"][0]["pixel_values"][0].get<std::vector<float>>();
  const size_t n = static_cast<size_t>(model->config().image_tokens() * model->config().text_embd);

  CpuBackend cpu({.n_threads = 1});
  std::vector<float> want(n);
  vision::VisionEncoder(model, cpu).encode(pixels, want.data());

  CudaBackendOptions options = test::small_options();
  options.f32_weights = WeightPrecision::f32;
  CudaBackend cuda(options);
  std::vector<float> got(n);
  vision::VisionEncoder(model, cuda).encode(pixels, got.data());

  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  EXPECT_LT(worst / scale, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaVision, ::testing::Values("llava_clip", "llava_siglip"));

}  // namespace
}  // namespace troupe
