// preprocess() against transformers 5.24's PIL-backed processors
// (CLIPImageProcessorPil, SiglipImageProcessorPil) given the fixture files
// themselves (transparent ones composited onto white by transformers), and
// preprocessor_config.json parsing: fields, class defaults, refusals.
#include "vision/image_processor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tests/vision/image_fixtures.hpp"

namespace troupe::vision {
namespace {

using testing::read_image_file;
using testing::reference;

// Resize must be byte-exact, and after it transformers does one float64
// multiply rounded to float32 and two float32 operations, which this code
// repeats in the same order; so outputs are expected to be bit-equal. The
// tolerance, 1e-6 on values of magnitude <= ~2.2 (a few float32 ulps), only
// absorbs a compiler that evaluates those steps differently; one resized byte
// off by 1 moves a value by 1/255/std >= 0.0145, far above it.
constexpr float kPixelTolerance = 1e-6f;

TEST(Preprocess, MatchesTransformersOnEveryFixtureCase) {
  const auto& cases = reference()["cases"];
  ASSERT_GE(cases.size(), 15u);
  for (const auto& c : cases) {
    const std::string label = c["label"].get<std::string>() + " on " + c["image"].get<std::string>();
    SCOPED_TRACE(label);
    EXPECT_TRUE(c["processor_class"].get<std::string>().ends_with("Pil")) << "the fixture must come from the slow one";
    const ImageProcessorConfig config = parse_image_processor_config(c["config"].dump());
    const Image image = decode_image(read_image_file(c["image"]));

    if (!c["resized_base64"].is_null()) {
      const PixelSize rs = resized_size(config, image.height, image.width);
      ASSERT_EQ(rs, (PixelSize{c["resized_height"].get<int32_t>(), c["resized_width"].get<int32_t>()}));
      // The fixture resized what transformers' convert_to_rgb gave.
      const Image input = config.do_convert_rgb ? composite_on_white(image) : image;
      const Image resized = resize_like_pillow(input, rs.width, rs.height, config.resample);
      const std::vector<uint8_t> want = testing::base64_decode(c["resized_base64"]);
      ASSERT_EQ(resized.rgb.size(), want.size());
      size_t differ = 0;
      for (size_t i = 0; i < want.size(); ++i) differ += resized.rgb[i] != want[i];
      EXPECT_EQ(differ, 0u) << "resized bytes differ from Pillow's Image.resize";
    }

    const PixelSize out = output_size(config, image.height, image.width);
    ASSERT_EQ(c["pixel_shape"], (nlohmann::json{3, out.height, out.width}));
    const std::vector<float> want = testing::base64_floats(c["pixel_values_f32le_base64"]);
    const std::vector<float> got = preprocess(image, config);
    ASSERT_EQ(got.size(), want.size());
    float worst = 0;
    size_t bit_equal = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::fabs(got[i] - want[i]));
      bit_equal += got[i] == want[i];
    }
    EXPECT_LE(worst, kPixelTolerance);
    EXPECT_EQ(bit_equal, want.size()) << "max |difference| " << worst;
  }
}

// The fixture must keep the cases that exercise each branch.
TEST(Preprocess, FixtureCoversEachBranch) {
  std::set<std::string> labels;
  for (const auto& c : reference()["cases"]) labels.insert(c["label"].get<std::string>());
  for (const char* want : {"clip", "siglip", "clip_bilinear", "clip_lanczos", "siglip_bilinear_up", "clip_crop_pads",
                           "clip_no_resize_crop_pads", "clip_no_rescale", "clip_no_normalize", "siglip_fast_name",
                           "siglip_no_convert_rgb", "clip_alpha", "siglip_alpha"}) {
    EXPECT_TRUE(labels.count(want)) << want;
  }
  // Each kind of transparency goes through a processor: alpha bands, palette
  // tRNS (one entry and many), and tRNS colours.
  std::set<std::string> transparent;
  for (const auto& c : reference()["cases"]) {
    if (!c["config"].contains("do_convert_rgb") || c["config"]["do_convert_rgb"] == true) {
      transparent.insert(c["image"].get<std::string>());
    }
  }
  for (const char* want : {"rgba_50x61.png", "gray_alpha16_11x9.png", "palette_37x23.png", "rgba_alpha_19x13.png",
                           "la_17x11.png", "palette_alpha_23x15.png", "rgb_trns_21x14.png", "gray1_trns_9x5.png",
                           "gray2_trns_9x5.png", "gray16_trns_9x7.png", "rgb16_trns_9x7.png"}) {
    EXPECT_TRUE(transparent.count(want)) << want;
  }
}

// do_convert_rgb false: the alpha is ignored, the colour used as decoded.
TEST(Preprocess, WithoutConvertRgbAlphaIsDropped) {
  ImageProcessorConfig config = parse_image_processor_config(reference()["cases"][0]["config"].dump());
  config.do_convert_rgb = false;
  const Image image = decode_image(read_image_file("rgba_alpha_19x13.png"));
  ASSERT_FALSE(image.alpha.empty());
  const Image colour_only{.width = image.width, .height = image.height, .rgb = image.rgb};
  EXPECT_EQ(preprocess(image, config), preprocess(colour_only, config));
  config.do_convert_rgb = true;
  EXPECT_NE(preprocess(image, config), preprocess(colour_only, config));
}

// Opaque input goes through unchanged whichever way do_convert_rgb is set.
TEST(Preprocess, OpaqueImagesDoNotDependOnConvertRgb) {
  ImageProcessorConfig config = parse_image_processor_config(reference()["cases"][0]["config"].dump());
  for (const char* name : {"rgb_37x23.png", "baseline_420_50x61.jpg", "gray16_50x61.png"}) {
    const Image image = decode_image(read_image_file(name));
    ASSERT_TRUE(image.alpha.empty()) << name;
    config.do_convert_rgb = true;
    const std::vector<float> with = preprocess(image, config);
    config.do_convert_rgb = false;
    EXPECT_EQ(with, preprocess(image, config)) << name;
  }
}

Image gradient(int32_t width, int32_t height) {
  Image img{.width = width, .height = height, .rgb = std::vector<uint8_t>(size_t(width) * height * 3)};
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = uint8_t((i * 37) % 251);
  return img;
}

// A flat image stays flat under every filter: the fixed-point weights of each
// output pixel must sum to 1 within the rounding that 8 bits hide.
TEST(ResizeLikePillow, FlatImageStaysFlat) {
  for (Resample r : {Resample::bilinear, Resample::bicubic, Resample::lanczos}) {
    for (uint8_t v : {0, 1, 128, 254, 255}) {
      Image img{.width = 17, .height = 9, .rgb = std::vector<uint8_t>(17 * 9 * 3, v)};
      for (auto [w, h] : {std::pair{5, 30}, {40, 3}, {1, 1}, {17, 4}}) {
        const Image out = resize_like_pillow(img, w, h, r);
        ASSERT_EQ(out.rgb.size(), size_t(w) * h * 3);
        for (uint8_t b : out.rgb) ASSERT_EQ(b, v) << "filter " << int(r) << " to " << w << "x" << h;
      }
    }
  }
}

// Sizes that make Pillow run either pass first (13 runs the vertical one
// first when the height loses more than twice the pixels the width loses):
// the uint8 rounding between the passes shows a wrong order as bytes off.
TEST(ResizeLikePillow, MatchesPillowWhicheverPassGoesFirst) {
  const nlohmann::json& resizes = testing::reference()["resizes"];
  ASSERT_GE(resizes.size(), 10u);
  int vertical_first = 0;
  for (const nlohmann::json& c : resizes) {
    const std::vector<uint8_t> file = testing::read_image_file(c["file"]);
    const Image img = decode_image(file);
    const int32_t w = c["width"], h = c["height"];
    vertical_first += img.height - h > 0 && img.height - h > 2 * (img.width - w) && w != img.width;
    const Image out = resize_like_pillow(img, w, h, static_cast<Resample>(c["resample"].get<int>()));
    EXPECT_EQ(out.rgb, testing::base64_decode(c["rgb_base64"]))
        << c["file"] << " to " << w << "x" << h << " resample " << c["resample"];
  }
  EXPECT_GE(vertical_first, 4) << "the fixture must make Pillow take the vertical pass first too";
}

TEST(ResizeLikePillow, SameSizeIsACopy) {
  const Image img = gradient(13, 7);
  EXPECT_EQ(resize_like_pillow(img, 13, 7, Resample::bicubic).rgb, img.rgb);
}

// Pillow skips the pass whose size does not change, so rows stay untouched
// when only the width changes: a 1-row image resized in x equals each row
// resized alone.
TEST(ResizeLikePillow, OnlyTheChangedAxisIsResampled) {
  const Image img = gradient(20, 6);
  const Image both = resize_like_pillow(img, 9, 6, Resample::bicubic);
  for (int32_t y = 0; y < 6; ++y) {
    Image row{.width = 20, .height = 1};
    row.rgb.assign(img.rgb.begin() + y * 60, img.rgb.begin() + (y + 1) * 60);
    const Image one = resize_like_pillow(row, 9, 1, Resample::bicubic);
    EXPECT_TRUE(std::equal(one.rgb.begin(), one.rgb.end(), both.rgb.begin() + y * 27)) << "row " << y;
  }
}

TEST(ResizeLikePillow, RejectsInconsistentImages) {
  Image bad{.width = 4, .height = 4, .rgb = std::vector<uint8_t>(10)};
  EXPECT_THROW(resize_like_pillow(bad, 2, 2, Resample::bicubic), Error);
  EXPECT_THROW(resize_like_pillow(gradient(4, 4), 0, 2, Resample::bicubic), Error);
  EXPECT_THROW(preprocess(bad, ImageProcessorConfig{}), Error);
  Image bad_alpha = gradient(4, 4);
  bad_alpha.alpha.resize(15);
  EXPECT_THROW(preprocess(bad_alpha, ImageProcessorConfig{}), Error);
}

// Alpha is not resampled, whichever passes run.
TEST(ResizeLikePillow, ResultHasNoAlpha) {
  Image img = gradient(6, 5);
  img.alpha.assign(30, 7);
  for (auto [w, h] : {std::pair{6, 5}, {3, 5}, {6, 2}, {3, 2}}) {
    EXPECT_TRUE(resize_like_pillow(img, w, h, Resample::bilinear).alpha.empty()) << w << "x" << h;
  }
}

// ------------------------------------------------------------ config

Error parse_error(const std::string& json_text) {
  try {
    parse_image_processor_config(json_text, "test.json");
    ADD_FAILURE() << "accepted " << json_text;
  } catch (const Error& e) {
    return e;
  }
  return Error(Errc::internal, "");
}

bool has_text(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A real CLIP ViT-L/14-336 preprocessor_config.json (as LLaVA 1.5 ships it).
TEST(ImageProcessorConfig, ReadsClipFields) {
  const auto c = parse_image_processor_config(R"({
    "crop_size": {"height": 336, "width": 336}, "do_center_crop": true, "do_convert_rgb": true,
    "do_normalize": true, "do_rescale": true, "do_resize": true,
    "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_processor_type": "CLIPImageProcessor",
    "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3, "rescale_factor": 0.00392156862745098,
    "size": {"shortest_edge": 336}, "processor_class": "LlavaProcessor"})");
  EXPECT_EQ(c.processor_type, "CLIPImageProcessor");
  EXPECT_EQ(c.shortest_edge, 336);
  EXPECT_EQ(c.crop_height, 336);
  EXPECT_EQ(c.crop_width, 336);
  EXPECT_EQ(c.resample, Resample::bicubic);
  EXPECT_EQ(c.rescale_factor, 1.0 / 255.0);
  EXPECT_EQ(c.image_std[2], 0.27577711f);
  EXPECT_EQ(fixed_output_size(c), (PixelSize{336, 336}));
  EXPECT_EQ(fixed_output_size(c)->pixels(), 336 * 336);
  EXPECT_EQ(output_size(c, 480, 640), (PixelSize{336, 336}));
  EXPECT_EQ(resized_size(c, 480, 640), (PixelSize{336, 448}));
  EXPECT_EQ(resized_size(c, 641, 480), (PixelSize{448, 336}));  // int(336 * 641 / 480) = 448
}

TEST(ImageProcessorConfig, ReadsSiglipFieldsAndDefaults) {
  const auto c = parse_image_processor_config(
      R"({"image_processor_type": "SiglipImageProcessor", "size": {"height": 384, "width": 384}})");
  EXPECT_EQ(c.shortest_edge, 0);
  EXPECT_EQ(c.resize_height, 384);
  EXPECT_FALSE(c.do_center_crop);  // SigLIP's class default
  EXPECT_EQ(c.image_mean[0], 0.5f);
  EXPECT_EQ(c.image_std[1], 0.5f);
  EXPECT_EQ(c.resample, Resample::bicubic);
  EXPECT_EQ(fixed_output_size(c), (PixelSize{384, 384}));
  EXPECT_EQ(output_size(c, 10, 1000), (PixelSize{384, 384}));
}

TEST(ImageProcessorConfig, AbsentOrNullFieldsTakeTheClassDefaults) {
  const auto c = parse_image_processor_config(R"({"image_processor_type": "CLIPImageProcessorFast", "size": null})");
  EXPECT_EQ(c.processor_type, "CLIPImageProcessorFast");
  EXPECT_EQ(c.shortest_edge, 224);
  EXPECT_EQ(c.crop_height, 224);
  EXPECT_TRUE(c.do_center_crop);
  EXPECT_EQ(c.image_mean[0], 0.48145466f);
  const auto v = parse_image_processor_config(R"({"image_processor_type": "ViTImageProcessorPil"})");
  EXPECT_EQ(v.resample, Resample::bilinear);
  EXPECT_EQ(v.resize_height, 224);
}

TEST(ImageProcessorConfig, IntegerSizeFollowsDefaultToSquare) {
  // CLIP: an integer is the shortest edge; ViT: a square; crop_size: a square.
  const auto clip = parse_image_processor_config(R"({"image_processor_type": "CLIPImageProcessor", "size": 224,
                                                     "crop_size": 200})");
  EXPECT_EQ(clip.shortest_edge, 224);
  EXPECT_EQ(clip.crop_height, 200);
  EXPECT_EQ(clip.crop_width, 200);
  EXPECT_FALSE(fixed_output_size(
      parse_image_processor_config(R"({"image_processor_type": "CLIPImageProcessor", "do_center_crop": false})")));
  const auto vit = parse_image_processor_config(R"({"image_processor_type": "ViTImageProcessor", "size": 96})");
  EXPECT_EQ(vit.shortest_edge, 0);
  EXPECT_EQ(vit.resize_height, 96);
  EXPECT_EQ(vit.resize_width, 96);
  const auto listed = parse_image_processor_config(R"({"image_processor_type": "SiglipImageProcessor",
                                                       "size": [30, 40], "image_mean": 0.25})");
  EXPECT_EQ(listed.resize_height, 30);
  EXPECT_EQ(listed.resize_width, 40);
  EXPECT_EQ(listed.image_mean[2], 0.25f);
}

TEST(ImageProcessorConfig, RefusesUnknownTypes) {
  const Error e = parse_error(R"({"image_processor_type": "LlavaNextImageProcessor"})");
  EXPECT_EQ(e.code(), Errc::unsupported);
  EXPECT_TRUE(has_text(e.what(), "test.json: \"image_processor_type\" is \"LlavaNextImageProcessor\"")) << e.what();
  EXPECT_TRUE(has_text(e.what(), "CLIPImageProcessor")) << e.what();
  EXPECT_EQ(parse_error(R"({"size": 224})").code(), Errc::bad_format);  // no type at all
}

TEST(ImageProcessorConfig, RefusesUnsupportedResample) {
  for (int r : {0, 4, 5}) {
    const Error e =
        parse_error(R"({"image_processor_type": "CLIPImageProcessor", "resample": )" + std::to_string(r) + "}");
    EXPECT_EQ(e.code(), Errc::unsupported);
    EXPECT_TRUE(has_text(e.what(), "\"resample\" is " + std::to_string(r))) << e.what();
  }
  EXPECT_EQ(parse_error(R"({"image_processor_type": "CLIPImageProcessor", "resample": "bicubic"})").code(),
            Errc::bad_format);
}

TEST(ImageProcessorConfig, RefusesWhatItDoesNotImplement) {
  struct Case {
    const char* fields;
    const char* key;
    Errc code;
  };
  for (const Case& c : {
           Case{R"("size": {"shortest_edge": 224, "longest_edge": 500})", "\"size\"", Errc::unsupported},
           Case{R"("size": {"max_height": 224, "max_width": 500})", "\"size\"", Errc::unsupported},
           Case{R"("size": "224")", "\"size\"", Errc::bad_format},
           Case{R"("size": {"shortest_edge": 0})", "\"size.shortest_edge\"", Errc::bad_format},
           Case{R"("size": {"height": 224, "width": -1})", "\"size.width\"", Errc::bad_format},
           Case{R"("do_pad": true)", "\"do_pad\"", Errc::unsupported},
           Case{R"("use_square_size": true)", "\"use_square_size\"", Errc::unsupported},
           Case{R"("crop_size": {"height": 224})", "\"crop_size\"", Errc::bad_format},
           Case{R"("image_std": [0.5, 0, 0.5])", "\"image_std\"", Errc::bad_format},
           Case{R"("image_mean": [0.5, 0.5])", "\"image_mean\"", Errc::bad_format},
           Case{R"("do_normalize": "yes")", "\"do_normalize\"", Errc::bad_format},
           Case{R"("rescale_factor": "1/255")", "\"rescale_factor\"", Errc::bad_format},
       }) {
    const Error e = parse_error(std::string(R"({"image_processor_type": "CLIPImageProcessor", )") + c.fields + "}");
    EXPECT_EQ(e.code(), c.code) << c.fields;
    EXPECT_TRUE(has_text(e.what(), c.key)) << c.fields << " -> " << e.what();
  }
  // SigLIP has no class crop_size, so turning the crop on needs one.
  EXPECT_TRUE(
      has_text(parse_error(R"({"image_processor_type": "SiglipImageProcessor", "do_center_crop": true})").what(),
               "\"crop_size\" is needed"));
}

TEST(ImageProcessorConfig, RefusesMalformedJson) {
  const Error e = parse_error("{\"image_processor_type\": ");
  EXPECT_EQ(e.code(), Errc::bad_format);
  EXPECT_TRUE(has_text(e.what(), "test.json: not valid JSON")) << e.what();
  EXPECT_TRUE(has_text(parse_error("[1, 2]").what(), "not a JSON object"));
}

TEST(ImageProcessorConfig, LoadsFromAFile) {
  const std::string path = testing::images_dir() + "/no_such_preprocessor_config.json";
  try {
    load_image_processor_config(path);
    ADD_FAILURE() << "opened a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
    EXPECT_TRUE(has_text(e.what(), path)) << e.what();
  }
}

TEST(ResizedSize, TruncatesTheLongSideLikePython) {
  ImageProcessorConfig c;
  c.shortest_edge = 24;
  EXPECT_EQ(resized_size(c, 23, 37), (PixelSize{24, 38}));  // 24 * 37 / 23 = 38.6
  EXPECT_EQ(resized_size(c, 61, 50), (PixelSize{29, 24}));  // 29.28
  EXPECT_EQ(resized_size(c, 24, 24), (PixelSize{24, 24}));
  EXPECT_THROW(resized_size(c, 1, 100000), Error);  // long side past the cap
  EXPECT_THROW(resized_size(c, 0, 10), Error);
}

}  // namespace
}  // namespace troupe::vision
