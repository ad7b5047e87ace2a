// LLaVA's and Gemma 3's image side against transformers (tests/fixtures/hf/
// llava_* and gemma3_vision, made by tools/fixtures/make_llava_models.py and
// make_gemma3_vision_model.py): the projected image features from
// the processor's pixel values, and from the PNG files themselves (decode,
// Pillow's resize, crop and normalize, then the tower).
#include "vision/vision_encoder.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "tests/exact_math.hpp"
#include "tests/vision/llava_fixture.hpp"
#include "vision/vision_model.hpp"

namespace troupe::vision {
namespace {

using test::file_bytes;
using test::hf_fixture;
using test::hf_reference;

// Largest |a - b| over the largest |b|: both sides compute in f32, in
// different orders.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0, scale = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return worst / scale;
}

class LlavaVision : public ::testing::TestWithParam<std::string> {};

TEST_P(LlavaVision, ReadsTheTowerAsTransformersConfiguresIt) {
  const auto model = VisionModel::load(hf_fixture(GetParam()));
  ASSERT_NE(model, nullptr);
  const nlohmann::json ref = hf_reference(GetParam());
  const VisionConfig& c = model->config();
  EXPECT_EQ(c.image_tokens(), ref["image_tokens"].get<int32_t>());
  EXPECT_EQ(c.image_token, ref["image_token_id"].get<int32_t>());
  EXPECT_EQ(c.text_embd, 64);
  const bool clip = ref["vision_class"] == "CLIPVisionConfig";
  EXPECT_EQ(c.tower == VisionConfig::Tower::clip, clip);
  EXPECT_EQ(c.class_token, clip);
  EXPECT_EQ(c.drop_first, clip);  // the CLIP fixture keeps "default", the SigLIP one "full"
  // vision_feature_layer -2 runs all but the last layer; -1 runs them all.
  EXPECT_EQ(c.n_run, clip ? c.n_layer - 1 : c.n_layer);
}

TEST_P(LlavaVision, FeaturesMatchTransformersFromPixelValues) {
  const test::ExactMath exact;
  const auto model = VisionModel::load(hf_fixture(GetParam()));
  ASSERT_NE(model, nullptr);
  CpuBackend backend({.n_threads = 2});
  VisionEncoder encoder(model, backend);
  const nlohmann::json ref = hf_reference(GetParam());
  int checked = 0;
  for (const nlohmann::json& c : ref["cases"]) {
    if (!c.contains("pixel_values")) continue;
    const auto want = c["image_features"].get<std::vector<float>>();
    const size_t per_image = static_cast<size_t>(model->config().image_tokens() * model->config().text_embd);
    ASSERT_EQ(want.size(), per_image * c["pixel_values"].size());
    for (size_t i = 0; i < c["pixel_values"].size(); ++i) {
      const auto pixels = c["pixel_values"][i].get<std::vector<float>>();
      std::vector<float> got(per_image);
      encoder.encode(pixels, got.data());
      const std::vector<float> expected(want.begin() + static_cast<ptrdiff_t>(i * per_image),
                                        want.begin() + static_cast<ptrdiff_t>((i + 1) * per_image));
      EXPECT_LT(relative_error(got, expected), 1e-5) << "case " << checked << " image " << i;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// The PNG files through the whole image side: decode, the image processor
// (Pillow's bicubic resize to the byte, crop, normalize), the tower.
TEST_P(LlavaVision, FeaturesMatchTransformersFromThePngFiles) {
  const test::ExactMath exact;
  const auto model = VisionModel::load(hf_fixture(GetParam()));
  ASSERT_NE(model, nullptr);
  CpuBackend backend({.n_threads = 1});
  VisionEncoder encoder(model, backend);
  const nlohmann::json ref = hf_reference(GetParam());
  const nlohmann::json& two = ref["cases"][1];  // image 0 then image 1
  const auto want = two["image_features"].get<std::vector<float>>();
  const size_t per_image = want.size() / 2;
  for (size_t i = 0; i < 2; ++i) {
    const std::string png = file_bytes(hf_fixture(GetParam()) + "/image" + std::to_string(i) + ".png");
    const std::vector<float> got = encoder.encode_image({reinterpret_cast<const uint8_t*>(png.data()), png.size()});
    const std::vector<float> expected(want.begin() + static_cast<ptrdiff_t>(i * per_image),
                                      want.begin() + static_cast<ptrdiff_t>((i + 1) * per_image));
    ASSERT_EQ(got.size(), expected.size());
    EXPECT_LT(relative_error(got, expected), 1e-5) << "image " << i;
  }
}

TEST_P(LlavaVision, RefusesBytesThatAreNoImage) {
  const auto model = VisionModel::load(hf_fixture(GetParam()));
  CpuBackend backend({.n_threads = 1});
  VisionEncoder encoder(model, backend);
  std::string png = file_bytes(hf_fixture(GetParam()) + "/image0.png");
  png.resize(png.size() / 2);  // cut in the middle of its data
  for (const std::string& bad : {png, std::string("GIF89a not an image")}) {
    try {
      encoder.encode_image({reinterpret_cast<const uint8_t*>(bad.data()), bad.size()});
      ADD_FAILURE() << "accepted " << bad.size() << " bytes";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("image"), std::string::npos) << e.what();
    }
  }
  // The encoder still works after a refusal.
  const std::string good = file_bytes(hf_fixture(GetParam()) + "/image1.png");
  EXPECT_FALSE(encoder.encode_image({reinterpret_cast<const uint8_t*>(good.data()), good.size()}).empty());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LlavaVision, ::testing::Values("llava_clip", "llava_siglip", "gemma3_vision"));

TEST(VisionModel, ATextModelHasNoVisionSide) {
  EXPECT_EQ(VisionModel::load(hf_fixture("llama")), nullptr);
  EXPECT_EQ(VisionModel::unsupported_reason(hf_fixture("llama")), "");
  EXPECT_EQ(VisionModel::load(std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf"), nullptr);
}

TEST(VisionModel, SaysWhichMultimodalTowersItDoesNotRun) {
  EXPECT_EQ(VisionModel::load(hf_fixture("qwen3_vl")), nullptr);
  const std::string why = VisionModel::unsupported_reason(hf_fixture("qwen3_vl"));
  EXPECT_NE(why.find("Qwen3VLForConditionalGeneration"), std::string::npos) << why;
  EXPECT_NE(why.find("images are refused"), std::string::npos) << why;
}

// A copy of a fixture with one file changed: each broken piece is named.
class BrokenLlava : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("troupe_llava_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::copy(hf_fixture("llava_clip"), dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  nlohmann::json config() {
    std::ifstream in(dir_ / "config.json");
    return nlohmann::json::parse(in);
  }
  void write_config(const nlohmann::json& j) { std::ofstream(dir_ / "config.json") << j.dump(); }
  std::string load_error() {
    try {
      VisionModel::load(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::filesystem::path dir_;
};

TEST_F(BrokenLlava, AnUnknownTowerIsNamed) {
  nlohmann::json j = config();
  j["vision_config"]["model_type"] = "pixtral";
  write_config(j);
  EXPECT_NE(load_error().find("vision tower 'pixtral' is not supported"), std::string::npos) << load_error();
}

TEST_F(BrokenLlava, AListOfFeatureLayersIsRefused) {
  nlohmann::json j = config();
  j["vision_feature_layer"] = nlohmann::json::array({-2, -5});
  write_config(j);
  EXPECT_NE(load_error().find("vision_feature_layer"), std::string::npos) << load_error();
}

TEST_F(BrokenLlava, AFeatureLayerPastTheTowerIsRefused) {
  nlohmann::json j = config();
  j["vision_feature_layer"] = 7;
  write_config(j);
  EXPECT_NE(load_error().find("outside the tower's 3 layers"), std::string::npos) << load_error();
}

TEST_F(BrokenLlava, AProcessorThatMakesOtherSizesIsRefused) {
  std::ifstream in(dir_ / "processor_config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  j["image_processor"]["crop_size"] = {{"height", 24}, {"width", 24}};
  std::ofstream(dir_ / "processor_config.json") << j.dump();
  EXPECT_NE(load_error().find("does not make the tower's 30x30 images"), std::string::npos) << load_error();
}

TEST_F(BrokenLlava, NoProcessorConfigIsNamed) {
  std::filesystem::remove(dir_ / "processor_config.json");
  EXPECT_NE(load_error().find("preprocessor_config.json"), std::string::npos) << load_error();
}

}  // namespace
}  // namespace troupe::vision
