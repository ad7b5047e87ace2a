// Decoded images for the vision towers: PNG or JPEG bytes in, 8-bit RGB (and
// alpha, where the file has any) out, the same pixels as Pillow's
// Image.open(f).convert("RGBA") (what CLIP/SigLIP preprocessing was run on
// when those models were trained), and the composite over white that
// transformers' and vLLM's image processors make of a transparent image.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace troupe::vision {

struct Image {
  int32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;    // [height, width, 3] interleaved, row-major
  std::vector<uint8_t> alpha;  // [height, width]; empty: opaque (no alpha band, no tRNS)
};

// Checked against the file's header before any pixel memory is allocated, so
// a small file that claims a huge image (a decompression bomb) costs nothing.
struct ImageLimits {
  int64_t max_pixels = 50'000'000;  // width * height; about 150 MB of RGB
};

// Detects PNG or JPEG by its magic bytes. As Pillow's convert("RGBA") does:
// gray and palette become RGB; 16-bit samples keep their high byte except
// 16-bit gray without alpha, which is clipped to 255; CMYK JPEGs are read with
// Adobe's inverted polarity. `alpha` is filled exactly where transformers'
// convert_to_rgb sees transparency (an alpha band, or a tRNS chunk, even one
// that matches no pixel): PNG gray+alpha and RGBA (16-bit: high byte), a
// palette's tRNS entries (255 past them), and a gray or RGB tRNS colour, which
// makes alpha 0 where the 8-bit pixel (as above) equals the low byte of each
// tRNS value (1-bit gray: 255 for a nonzero value), as Pillow compares them.
// That is not always the PNG spec's match (a 2-bit key of 2 matches no pixel;
// a 16-bit key matches by low byte), but it is what users' references do.
// JPEGs have no alpha. EXIF orientation is not applied (Image.open does not
// apply it either).
// Throws troupe::Error: invalid_argument for empty input or one over `limits`,
// unsupported for other formats, bad_format for corrupt or truncated data.
Image decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits = {});

// Whether this build decodes PNG and JPEG (libpng and libjpeg were found
// when it was built); without them decode_image refuses every image
// (Errc::unsupported), saying so.
bool image_codecs_available();

// `image` alpha-composited onto opaque white, to the byte what
// Image.alpha_composite(white, image.convert("RGBA")).convert("RGB") gives:
// what transformers' convert_to_rgb and vLLM do before resizing. The result
// has no alpha; an image without alpha comes back unchanged. Throws
// troupe::Error (invalid_argument) when a buffer's size is not width * height
// times its channel count.
Image composite_on_white(const Image& image);

}  // namespace troupe::vision
