// libFuzzer target for the image side of a vision-language model
// (vision/image.cpp, vision/image_processor.cpp): any bytes as a client's
// image. decode_image either returns an image within the pixel bound, its
// buffers the size its dimensions say, or throws troupe::Error; a decoded
// image then goes through CLIP's and SigLIP's preprocessing, which must give
// the tensor of the size the config says. Built and run by run_fuzzers.py.
#include <cstddef>
#include <cstdint>

#include "core/error.hpp"
#include "tests/fuzz/fuzz_util.hpp"
#include "vision/image.hpp"
#include "vision/image_processor.hpp"

using namespace troupe::fuzz;

namespace {

// Small outputs keep each run fast; the resize paths (up, down, both) are
// the same at any size.
const troupe::vision::ImageProcessorConfig& clip() {
  static const auto c = troupe::vision::parse_image_processor_config(
      R"({"image_processor_type": "CLIPImageProcessor", "size": {"shortest_edge": 20},
          "crop_size": {"height": 20, "width": 20}, "resample": 3})");
  return c;
}

const troupe::vision::ImageProcessorConfig& siglip() {
  static const auto c = troupe::vision::parse_image_processor_config(
      R"({"image_processor_type": "SiglipImageProcessor", "size": {"height": 12, "width": 18}, "resample": 2})");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr int64_t kMaxPixels = 1 << 20;
  troupe::vision::Image image;
  try {
    image = troupe::vision::decode_image({data, size}, {.max_pixels = kMaxPixels});
  } catch (const troupe::Error& e) {
    refused(e);
    return 0;
  }
  const int64_t pixels = int64_t{image.width} * image.height;
  check(image.width > 0 && image.height > 0 && pixels <= kMaxPixels);
  check(image.rgb.size() == static_cast<size_t>(pixels) * 3);
  for (const auto* config : {&clip(), &siglip()}) {
    const troupe::vision::PixelSize out = troupe::vision::output_size(*config, image.height, image.width);
    const std::vector<float> tensor = troupe::vision::preprocess(image, *config);
    check(tensor.size() == static_cast<size_t>(out.pixels()) * 3);
  }
  return 0;
}
