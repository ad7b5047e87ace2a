// decode_image against Pillow: every fixture image must decode to exactly the
// bytes of Image.open(f).convert("RGBA") (alpha only where the file has
// transparency), composite_on_white to Pillow's alpha_composite over white,
// and every bad input must fail with a troupe::Error whose message says what
// is wrong.
#include "vision/image.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tests/vision/image_fixtures.hpp"

namespace troupe::vision {
namespace {

using testing::read_image_file;
using testing::reference;

// Runs decode_image and returns the error it throws (failing if it does not).
Error decode_error(std::span<const uint8_t> bytes, const ImageLimits& limits = {}) {
  try {
    const Image img = decode_image(bytes, limits);
    ADD_FAILURE() << "decoded a " << img.width << "x" << img.height << " image from bad input";
  } catch (const Error& e) {
    return e;
  }
  return Error(Errc::internal, "");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// How many bytes differ, and where the first one is, for a readable failure.
::testing::AssertionResult same_bytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, int channels) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
  }
  size_t differ = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i] && differ++ == 0) first = i;
  }
  if (differ == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differ << " bytes differ from Pillow; first at pixel " << first / channels
                                       << " channel " << first % channels << ": " << int(got[first]) << " vs "
                                       << int(want[first]);
}

TEST(DecodeImage, EveryFixtureEqualsPillowsRgbBytes) {
  const auto& images = reference()["images"];
  ASSERT_GE(images.size(), 20u);
  for (const auto& entry : images) {
    const std::string name = entry["file"];
    SCOPED_TRACE(name);
    const Image img = decode_image(read_image_file(name));
    ASSERT_EQ(img.width, entry["width"].get<int32_t>());
    ASSERT_EQ(img.height, entry["height"].get<int32_t>());
    EXPECT_TRUE(same_bytes(img.rgb, testing::base64_decode(entry["rgb_base64"]), 3));
  }
}

// Alpha exactly where transformers' convert_to_rgb sees transparency, with
// the bytes of Pillow's convert("RGBA"): alpha bands, palette and gray/RGB
// tRNS (Pillow's low-byte comparison included); JPEGs and opaque PNGs none.
TEST(DecodeImage, AlphaEqualsPillowsRgbaConversion) {
  size_t with_alpha = 0;
  for (const auto& entry : reference()["images"]) {
    const std::string name = entry["file"];
    SCOPED_TRACE(name);
    const Image img = decode_image(read_image_file(name));
    ASSERT_EQ(!img.alpha.empty(), entry["transparency"].get<bool>());
    if (entry["alpha_base64"].is_null()) continue;
    ++with_alpha;
    EXPECT_TRUE(same_bytes(img.alpha, testing::base64_decode(entry["alpha_base64"]), 1));
  }
  EXPECT_GE(with_alpha, 11u);
}

TEST(CompositeOnWhite, EqualsPillowsAlphaCompositeOnEveryFixture) {
  for (const auto& entry : reference()["images"]) {
    const std::string name = entry["file"];
    SCOPED_TRACE(name);
    const Image img = decode_image(read_image_file(name));
    const Image out = composite_on_white(img);
    EXPECT_EQ(out.width, img.width);
    EXPECT_EQ(out.height, img.height);
    EXPECT_TRUE(out.alpha.empty());
    // Without transparency transformers converts without compositing: the colour stays.
    const auto& want = entry["composite_rgb_base64"].is_null() ? entry["rgb_base64"] : entry["composite_rgb_base64"];
    EXPECT_TRUE(same_bytes(out.rgb, testing::base64_decode(want), 3));
  }
}

// Every (value, alpha) pair against Pillow's table (row alpha, column value),
// each channel given a different value so a mixed-up channel shows.
TEST(CompositeOnWhite, EqualsPillowOnEveryValueAlphaPair) {
  const Image table = decode_image(read_image_file(reference()["composite_table"]));
  ASSERT_EQ(table.width, 256);
  ASSERT_EQ(table.height, 256);
  Image img{.width = 256,
            .height = 256,
            .rgb = std::vector<uint8_t>(256 * 256 * 3),
            .alpha = std::vector<uint8_t>(256 * 256)};
  for (size_t a = 0; a < 256; ++a) {
    for (size_t v = 0; v < 256; ++v) {
      const size_t i = a * 256 + v;
      img.rgb[3 * i] = uint8_t(v);
      img.rgb[3 * i + 1] = uint8_t(255 - v);
      img.rgb[3 * i + 2] = uint8_t(v * 7);
      img.alpha[i] = uint8_t(a);
    }
  }
  const Image out = composite_on_white(img);
  size_t differ = 0;
  for (size_t i = 0; i < 256 * 256; ++i) {
    const size_t row = (i / 256) * 256;
    for (size_t c = 0; c < 3; ++c) {
      // The table is gray (R = G = B); the value that pair composites to is at column rgb[c].
      const uint8_t want = table.rgb[3 * (row + img.rgb[3 * i + c])];
      differ += out.rgb[3 * i + c] != want;
    }
  }
  EXPECT_EQ(differ, 0u);
}

TEST(CompositeOnWhite, OpaqueImagesAreUnchanged) {
  Image img{.width = 5, .height = 3, .rgb = std::vector<uint8_t>(45)};
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = uint8_t(i * 37);
  EXPECT_EQ(composite_on_white(img).rgb, img.rgb);  // no alpha at all
  img.alpha.assign(15, 255);
  const Image out = composite_on_white(img);
  EXPECT_EQ(out.rgb, img.rgb);  // alpha 255 everywhere
  EXPECT_TRUE(out.alpha.empty());
  img.alpha.assign(15, 0);
  EXPECT_EQ(composite_on_white(img).rgb, std::vector<uint8_t>(45, 255));  // fully transparent: white
}

TEST(CompositeOnWhite, RejectsInconsistentBuffers) {
  Image img{.width = 4, .height = 2, .rgb = std::vector<uint8_t>(24), .alpha = std::vector<uint8_t>(7)};
  EXPECT_THROW(composite_on_white(img), Error);
  img.alpha.clear();
  img.rgb.resize(23);
  EXPECT_THROW(composite_on_white(img), Error);
  EXPECT_THROW(composite_on_white(Image{}), Error);
}

// The fixture must keep covering each layout the decoder handles differently.
TEST(DecodeImage, FixturesCoverEveryLayout) {
  std::set<std::string> names;
  for (const auto& entry : reference()["images"]) names.insert(entry["file"].get<std::string>());
  for (const char* want : {"rgb_37x23.png",           "rgba_50x61.png",
                           "palette_37x23.png",       "gray16_50x61.png",
                           "rgb16_adam7_13x19.png",   "gray_alpha16_11x9.png",
                           "gray2_21x5.png",          "baseline_420_50x61.jpg",
                           "baseline_422_50x61.jpg",  "progressive_420_37x23.jpg",
                           "gray_37x23.jpg",          "cmyk_24x19.jpg",
                           "rgba_alpha_19x13.png",    "la_17x11.png",
                           "palette_alpha_23x15.png", "rgb_trns_21x14.png",
                           "gray1_trns_9x5.png",      "gray2_trns_9x5.png",
                           "gray16_trns_9x7.png",     "rgb16_trns_9x7.png"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
}

// Pillow's I;16 -> RGB clips at 255 where a scaled conversion would give
// v >> 8; the fixture's values reach 800, so both kinds of pixel are present.
TEST(DecodeImage, SixteenBitGrayClipsAsPillowDoes) {
  const Image img = decode_image(read_image_file("gray16_50x61.png"));
  size_t clipped = 0, mid = 0;
  for (size_t i = 0; i < img.rgb.size(); i += 3) {
    EXPECT_TRUE(img.rgb[i] == img.rgb[i + 1] && img.rgb[i] == img.rgb[i + 2]);
    clipped += img.rgb[i] == 255;
    mid += img.rgb[i] >= 4 && img.rgb[i] < 255;  // v >> 8 of v <= 800 is at most 3
  }
  EXPECT_GT(clipped, 1000u);
  EXPECT_GT(mid, 1000u);
}

TEST(DecodeImage, EmptyInput) {
  const Error e = decode_error({});
  EXPECT_EQ(e.code(), Errc::invalid_argument);
  EXPECT_TRUE(contains(e.what(), "no data")) << e.what();
}

TEST(DecodeImage, RandomBytesAreAnUnsupportedFormat) {
  std::mt19937 rng(7);
  for (size_t n : {1, 2, 7, 100, 5000}) {
    std::vector<uint8_t> bytes(n);
    for (auto& b : bytes) b = uint8_t(rng());
    bytes[0] = 0x42;  // neither 0x89 (PNG) nor 0xff (JPEG)
    const Error e = decode_error(bytes);
    EXPECT_EQ(e.code(), Errc::unsupported);
    EXPECT_STREQ(e.what(), "image: unsupported format (expected PNG or JPEG)");
  }
  const std::string gif = "GIF89a\x01\x00\x01\x00";
  EXPECT_EQ(decode_error(std::span(reinterpret_cast<const uint8_t*>(gif.data()), gif.size())).code(),
            Errc::unsupported);
}

// Cut points: inside the signature, inside IHDR, just after it, inside the
// pixel data. Pillow fails on each of them too ("image file is truncated").
TEST(DecodeImage, TruncatedPngFails) {
  for (const char* name : {"rgb_37x23.png", "rgb16_adam7_13x19.png", "palette_37x23.png"}) {
    const std::vector<uint8_t> file = read_image_file(name);
    for (size_t cut : {size_t(3), size_t(8), size_t(20), size_t(33), file.size() / 2, file.size() - 40}) {
      SCOPED_TRACE(std::string(name) + " cut at " + std::to_string(cut));
      const Error e = decode_error(std::span(file).first(cut));
      EXPECT_EQ(e.code(), Errc::bad_format);
      EXPECT_TRUE(contains(e.what(), "image: PNG: ")) << e.what();
      EXPECT_TRUE(contains(e.what(), "truncated")) << e.what();
    }
  }
}

// Pillow, like libpng here, never reads past the last IDAT for pixels, so a
// file missing only its IEND chunk still decodes (to the same bytes).
TEST(DecodeImage, PngWithoutIendStillDecodes) {
  const std::vector<uint8_t> file = read_image_file("rgb_37x23.png");
  const Image whole = decode_image(file);
  const Image cut = decode_image(std::span(file).first(file.size() - 12));
  EXPECT_EQ(cut.rgb, whole.rgb);
}

// Pillow fails on all of these cuts, the last two included (it stops at the
// missing EOI's look-ahead); so does libjpeg's entropy decoder here.
TEST(DecodeImage, TruncatedJpegFails) {
  for (const char* name : {"baseline_420_50x61.jpg", "progressive_420_37x23.jpg", "gray_37x23.jpg"}) {
    const std::vector<uint8_t> file = read_image_file(name);
    for (size_t cut : {size_t(2), size_t(8), size_t(33), file.size() / 2, file.size() - 12, file.size() - 2}) {
      SCOPED_TRACE(std::string(name) + " cut at " + std::to_string(cut));
      const Error e = decode_error(std::span(file).first(cut));
      EXPECT_EQ(e.code(), Errc::bad_format);
      EXPECT_TRUE(contains(e.what(), "image: JPEG: data is truncated")) << e.what();
    }
  }
}

// CRC-32 of PNG chunks (ISO 3309), to build headers by hand.
uint32_t crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(uint8_t(x >> s));
}

// A PNG signature and a valid IHDR (CRC included) for width x height 8-bit
// RGB, followed by a tiny IDAT that never gets read if the size is refused.
std::vector<uint8_t> png_header(uint32_t width, uint32_t height) {
  std::vector<uint8_t> v = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  std::vector<uint8_t> chunk = {'I', 'H', 'D', 'R'};
  put_be32(chunk, width);
  put_be32(chunk, height);
  for (uint8_t b : {8, 2, 0, 0, 0}) chunk.push_back(b);  // depth, RGB, deflate, filter 0, no interlace
  put_be32(v, 13);
  v.insert(v.end(), chunk.begin(), chunk.end());
  put_be32(v, crc32(chunk.data(), chunk.size()));
  const std::vector<uint8_t> idat = {0, 0, 0, 2, 'I', 'D', 'A', 'T', 0x78, 0x9c, 0, 0, 0, 0};
  v.insert(v.end(), idat.begin(), idat.end());
  return v;
}

TEST(DecodeImage, PngClaimingHugeSizeIsRefusedBeforeDecoding) {
  const Error e = decode_error(png_header(100000, 100000));
  EXPECT_EQ(e.code(), Errc::invalid_argument);
  EXPECT_STREQ(e.what(), "image: PNG of 100000x100000 pixels is over the limit of 50000000 pixels");
  // Past libpng's own default cap of 1e6 per side: still our message.
  EXPECT_TRUE(contains(decode_error(png_header(2'000'000'000, 1)).what(), "over the limit")) << e.what();
}

TEST(DecodeImage, PngWithZeroWidthIsCorrupt) {
  const Error e = decode_error(png_header(0, 10));
  EXPECT_EQ(e.code(), Errc::bad_format);
  EXPECT_TRUE(contains(e.what(), "image: PNG: ")) << e.what();
  EXPECT_TRUE(contains(e.what(), "width is zero")) << e.what();  // libpng's warning, kept for the message
}

TEST(DecodeImage, PngWithDamagedChunksIsCorrupt) {
  std::vector<uint8_t> file = read_image_file("rgb_37x23.png");
  const std::string idat = "IDAT";
  const auto at = std::search(file.begin(), file.end(), idat.begin(), idat.end());
  ASSERT_NE(at, file.end());
  at[20] ^= 0x55;  // a byte of compressed pixel data: zlib (or else the chunk's CRC) objects
  const Error e = decode_error(file);
  EXPECT_EQ(e.code(), Errc::bad_format);
  EXPECT_TRUE(contains(e.what(), "image: PNG: IDAT: ")) << e.what();
  // A damaged chunk type is caught too.
  file = read_image_file("rgb_37x23.png");
  file[39] = 0x01;  // the type of the chunk after IHDR (IHDR ends at byte 33)
  EXPECT_TRUE(contains(decode_error(file).what(), "invalid chunk type")) << e.what();
}

// The SOF marker's height and width patched to 60000 x 60000.
TEST(DecodeImage, JpegClaimingHugeSizeIsRefusedBeforeDecoding) {
  std::vector<uint8_t> file = read_image_file("baseline_420_50x61.jpg");
  bool patched = false;
  for (size_t i = 2; i + 9 < file.size() && !patched; ++i) {
    if (file[i] == 0xff && (file[i + 1] == 0xc0 || file[i + 1] == 0xc2)) {
      file[i + 5] = 0xea, file[i + 6] = 0x60;  // height 60000
      file[i + 7] = 0xea, file[i + 8] = 0x60;  // width 60000
      patched = true;
    }
  }
  ASSERT_TRUE(patched);
  const Error e = decode_error(file);
  EXPECT_EQ(e.code(), Errc::invalid_argument);
  EXPECT_STREQ(e.what(), "image: JPEG of 60000x60000 pixels is over the limit of 50000000 pixels");
}

TEST(DecodeImage, JpegWithBrokenHeaderIsCorrupt) {
  std::vector<uint8_t> file = read_image_file("gray_37x23.jpg");
  // Overwrite everything after SOI with 0xff 0x01 pairs: no valid marker segment.
  for (size_t i = 2; i + 1 < 40; i += 2) file[i] = 0xff, file[i + 1] = 0x01;
  const Error e = decode_error(file);
  EXPECT_EQ(e.code(), Errc::bad_format);
  EXPECT_TRUE(contains(e.what(), "image: JPEG: ")) << e.what();
  EXPECT_GT(std::string(e.what()).size(), std::string("image: JPEG: ").size() + 5) << "libjpeg's reason is kept";
}

TEST(DecodeImage, LimitIsInclusive) {
  const std::vector<uint8_t> file = read_image_file("rgb_37x23.png");
  EXPECT_EQ(decode_image(file, {.max_pixels = 37 * 23}).width, 37);
  const Error e = decode_error(file, {.max_pixels = 37 * 23 - 1});
  EXPECT_EQ(e.code(), Errc::invalid_argument);
  EXPECT_STREQ(e.what(), "image: PNG of 37x23 pixels is over the limit of 850 pixels");
  const std::vector<uint8_t> jpeg = read_image_file("gray_37x23.jpg");
  EXPECT_EQ(decode_error(jpeg, {.max_pixels = 100}).code(), Errc::invalid_argument);
}

}  // namespace
}  // namespace troupe::vision
