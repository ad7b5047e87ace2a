// Hugging Face image preprocessing for CLIP/SigLIP-style vision towers: a
// preprocessor_config.json read into a plain struct, and the pixel tensor that
// transformers' PIL-backed ("slow") processor makes from an image file, to the
// bit: transparency onto white, resize with Pillow's resampling, center crop,
// rescale, normalize.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vision/image.hpp"

namespace troupe::vision {

// Pillow's filter numbers, as preprocessor_config.json's "resample" holds them.
enum class Resample : uint8_t { lanczos = 1, bilinear = 2, bicubic = 3 };

// The fields of CLIPImageProcessor / SiglipImageProcessor (and the Bit, ViT
// and Blip processors, which use the same steps). Defaults are
// CLIPImageProcessor's; parse_image_processor_config fills in the defaults
// of the type the file names.
struct ImageProcessorConfig {
  std::string processor_type = "CLIPImageProcessor";  // image_processor_type, "Fast"/"Pil" suffix kept
  bool do_resize = true;
  // shortest_edge > 0: the short side becomes shortest_edge and the long side
  // int(shortest_edge * long / short); otherwise exactly resize_height x resize_width.
  int32_t shortest_edge = 224;
  int32_t resize_height = 0, resize_width = 0;
  Resample resample = Resample::bicubic;
  bool do_center_crop = true;
  int32_t crop_height = 224, crop_width = 224;  // pads with zeros where the image is smaller
  bool do_rescale = true;
  double rescale_factor = 1.0 / 255.0;
  bool do_normalize = true;
  std::array<float, 3> image_mean = {0.48145466f, 0.4578275f, 0.40821073f};  // per RGB channel
  std::array<float, 3> image_std = {0.26862954f, 0.26130258f, 0.27577711f};
  // Composite an image with alpha onto white first (transformers' convert_to_rgb).
  // False: alpha is ignored. The default is true for every type, ViT's too,
  // whose transformers class leaves it unset (and then fails on RGBA input).
  bool do_convert_rgb = true;
};

// Reads the JSON text of a preprocessor_config.json. `source` names it in
// errors. Throws troupe::Error (bad_format: malformed JSON or a field of the
// wrong type or range; unsupported: an unknown image_processor_type, a
// resample other than 1/2/3, a size rule, padding or option not implemented),
// naming the field at fault.
ImageProcessorConfig parse_image_processor_config(std::string_view json_text,
                                                  std::string_view source = "preprocessor_config.json");
// The same from a file (Errc::io when it cannot be read).
ImageProcessorConfig load_image_processor_config(const std::string& path);

struct PixelSize {
  int32_t height = 0, width = 0;
  int64_t pixels() const { return int64_t(height) * width; }
  bool operator==(const PixelSize&) const = default;
};

// Size after the resize step alone (the input size when do_resize is false).
PixelSize resized_size(const ImageProcessorConfig& config, int32_t height, int32_t width);
// [H, W] of preprocess's output for an input of height x width.
PixelSize output_size(const ImageProcessorConfig& config, int32_t height, int32_t width);
// The output size when it does not depend on the input (center crop, or an
// exact resize): what a vision tower's patch count is computed from.
std::optional<PixelSize> fixed_output_size(const ImageProcessorConfig& config);

// Pillow's Image.resize((width, height), filter) on 8-bit RGB, byte for byte.
// Alpha is not resampled: the result has none.
Image resize_like_pillow(const Image& image, int32_t width, int32_t height, Resample filter);

// transformers' pixel_values[0] for `image` (as decode_image gives it, alpha
// included): [3, H, W] float32, channel-first, H x W = output_size(config,
// image.height, image.width). Throws troupe::Error (invalid_argument) for
// buffers of the wrong size.
std::vector<float> preprocess(const Image& image, const ImageProcessorConfig& config);

}  // namespace troupe::vision
