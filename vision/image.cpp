// PNG (libpng) and JPEG (libjpeg-turbo) decoding to the RGB and alpha bytes
// Pillow's convert("RGBA") gives, and Pillow's alpha composite over white.
// Both libraries report errors by longjmp, so each
// decoder keeps its state in plain structs owned by the caller's frame, and
// the function that calls setjmp turns a jump into a troupe::Error; no C++
// object lives in a frame that a longjmp skips.
#include "vision/image.hpp"

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

// Set by the build where libpng and libjpeg were found.
#ifndef TROUPE_HAVE_IMAGE_CODECS
#define TROUPE_HAVE_IMAGE_CODECS 0
#endif

#if TROUPE_HAVE_IMAGE_CODECS
// clang-format off: jpeglib.h uses FILE without including <cstdio>.
#include <jpeglib.h>
#include <png.h>
// clang-format on
#endif

#include "core/error.hpp"

namespace troupe::vision {
namespace {

constexpr uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
constexpr uint8_t kJpegSignature[3] = {0xff, 0xd8, 0xff};

[[noreturn]] void fail(Errc code, const std::string& what) { throw Error(code, "image: " + what); }

#if TROUPE_HAVE_IMAGE_CODECS

// Called once the header is read and before any pixel buffer exists.
void check_dimensions(const char* format, int64_t width, int64_t height, const ImageLimits& limits) {
  const std::string size = std::to_string(width) + "x" + std::to_string(height);
  if (width <= 0 || height <= 0) fail(Errc::bad_format, std::string(format) + " header says " + size + " pixels");
  if (width > limits.max_pixels / height) {
    fail(Errc::invalid_argument, std::string(format) + " of " + size + " pixels is over the limit of " +
                                     std::to_string(limits.max_pixels) + " pixels");
  }
}

// ---------------------------------------------------------------- PNG

// Everything libpng's callbacks touch. `raw` holds the decoded rows
// [height, rowbytes] in libpng's layout (16-bit samples big-endian).
// A gray or RGB tRNS colour is not expanded by libpng but kept as `key`: the
// 8-bit values Pillow compares each converted pixel with.
struct PngSession {
  const uint8_t* data = nullptr;
  size_t size = 0, pos = 0;
  char error[256] = {};
  char last_warning[256] = {};
  std::vector<uint8_t> raw;
  std::vector<png_bytep> rows;
  size_t rowbytes = 0;
  int channels = 0, bit_depth = 0;
  bool gray16_clips = false;
  bool has_key = false;
  uint8_t key[3] = {};  // R, G, B (gray: the same value three times)
};

void png_read_memory(png_structp png, png_bytep out, size_t n) {
  auto* s = static_cast<PngSession*>(png_get_io_ptr(png));
  if (n > s->size - s->pos) png_error(png, "data is truncated");
  std::memcpy(out, s->data + s->pos, n);
  s->pos += n;
}

void png_on_error(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngSession*>(png_get_error_ptr(png));
  std::snprintf(s->error, sizeof(s->error), "%s", msg);
  png_longjmp(png, 1);
}

// libpng explains some errors only in a warning just before ("Image width is
// zero in IHDR", then the error "Invalid IHDR data"); keep it for the message.
void png_on_warning(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngSession*>(png_get_error_ptr(png));
  std::snprintf(s->last_warning, sizeof(s->last_warning), "%s", msg);
}

// The only function that calls setjmp for libpng. Reads the header, checks the
// size, then all rows (Adam7 passes combined) into s.raw.
void png_read_rows(png_structp png, png_infop info, PngSession& s, const ImageLimits& limits) {
  if (setjmp(png_jmpbuf(png))) {
    std::string what = std::string("PNG: ") + s.error;
    if (s.last_warning[0] != '\0') what += std::string(" (") + s.last_warning + ")";
    fail(Errc::bad_format, what);
  }
  png_set_read_fn(png, &s, png_read_memory);
  // libpng's own width/height cap (1e6) would refuse first with a less clear
  // message; check_dimensions below applies the caller's limit instead.
  png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
  png_read_info(png, info);

  png_uint_32 width = 0, height = 0;
  int bit_depth = 0, color_type = 0, interlace = 0;
  png_get_IHDR(png, info, &width, &height, &bit_depth, &color_type, &interlace, nullptr, nullptr);
  check_dimensions("PNG", width, height, limits);

  // Pillow keeps a gray or RGB tRNS value as it is in the file and compares
  // only its low byte (its converters mask with 0xff) with the 8-bit pixel;
  // mode "1" (1-bit gray) stores 255 for any nonzero value. Read before any
  // transform is set: libpng rescales its own copy when it expands gray.
  png_color_16p trans = nullptr;
  if ((color_type == PNG_COLOR_TYPE_GRAY || color_type == PNG_COLOR_TYPE_RGB) &&
      png_get_tRNS(png, info, nullptr, nullptr, &trans) != 0 && trans != nullptr) {
    const auto key = [bit_depth](png_uint_16 v) { return uint8_t(bit_depth == 1 ? (v != 0 ? 255 : 0) : v & 0xff); };
    s.has_key = true;
    if (color_type == PNG_COLOR_TYPE_GRAY) {
      s.key[0] = s.key[1] = s.key[2] = key(trans->gray);
    } else {
      s.key[0] = key(trans->red);
      s.key[1] = key(trans->green);
      s.key[2] = key(trans->blue);
    }
  }

  // Only the expansions Pillow's unpackers also do: palette indices to RGB
  // (with a tRNS chunk, each entry's alpha as a 4th channel, 255 past the
  // chunk's end, as Pillow's putpalettealphas) and 1/2/4-bit gray scaled to
  // 8 bits by bit replication (0x55 * v for 2-bit, as Pillow's L;2). No gamma,
  // no 16-to-8 reduction here: Pillow ignores gAMA, and its 16-bit rules are
  // applied in png_to_image.
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);

  s.channels = png_get_channels(png, info);
  s.bit_depth = png_get_bit_depth(png, info);
  s.rowbytes = png_get_rowbytes(png, info);
  s.gray16_clips = color_type == PNG_COLOR_TYPE_GRAY && bit_depth == 16;
  if (s.channels < 1 || s.channels > 4 || (s.bit_depth != 8 && s.bit_depth != 16)) {
    fail(Errc::unsupported, "PNG: unexpected layout after expansion");
  }
  s.raw.resize(s.rowbytes * height);
  s.rows.resize(height);
  for (png_uint_32 y = 0; y < height; ++y) s.rows[y] = s.raw.data() + y * s.rowbytes;
  png_read_image(png, s.rows.data());
}

// One sample of the decoded rows as Pillow's 8-bit value: the high byte of a
// 16-bit sample (its ";16B" unpackers; alpha too), except 16-bit gray without
// alpha, which Pillow opens as mode I;16 and whose convert("RGB"/"RGBA") clips
// at 255.
uint8_t png_sample(const PngSession& s, const uint8_t* row, size_t i) {
  if (s.bit_depth == 8) return row[i];
  const uint8_t hi = row[2 * i], lo = row[2 * i + 1];
  if (s.gray16_clips) return hi == 0 ? lo : 255;
  return hi;
}

Image png_to_image(const PngSession& s, int32_t width, int32_t height) {
  Image img{.width = width, .height = height, .rgb = std::vector<uint8_t>(size_t(width) * height * 3)};
  // Gray or gray+alpha, RGB or RGBA (a palette with tRNS too); alpha comes last.
  const bool gray = s.channels <= 2;
  const int alpha_channel = s.channels == 2 || s.channels == 4 ? s.channels - 1 : -1;
  if (alpha_channel >= 0 || s.has_key) img.alpha.assign(size_t(width) * height, 255);
  for (int32_t y = 0; y < height; ++y) {
    const uint8_t* row = s.rows[y];
    uint8_t* out = img.rgb.data() + size_t(y) * width * 3;
    uint8_t* alpha = img.alpha.empty() ? nullptr : img.alpha.data() + size_t(y) * width;
    for (int32_t x = 0; x < width; ++x, out += 3) {
      const size_t p = size_t(x) * s.channels;
      if (gray) {
        out[0] = out[1] = out[2] = png_sample(s, row, p);
      } else {
        for (int c = 0; c < 3; ++c) out[c] = png_sample(s, row, p + c);
      }
      if (alpha_channel >= 0) {
        alpha[x] = png_sample(s, row, p + alpha_channel);
      } else if (s.has_key && out[0] == s.key[0] && out[1] == s.key[1] && out[2] == s.key[2]) {
        alpha[x] = 0;
      }
    }
  }
  return img;
}

Image decode_png(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  PngSession s;
  s.data = bytes.data();
  s.size = bytes.size();
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, png_on_error, png_on_warning);
  if (png == nullptr) fail(Errc::internal, "PNG: cannot create a libpng reader");
  png_infop info = png_create_info_struct(png);
  struct Release {
    png_structp* png;
    png_infop* info;
    ~Release() { png_destroy_read_struct(png, info, nullptr); }
  } release{&png, &info};
  if (info == nullptr) fail(Errc::internal, "PNG: cannot create a libpng reader");
  png_read_rows(png, info, s, limits);
  return png_to_image(s, int32_t(png_get_image_width(png, info)), int32_t(png_get_image_height(png, info)));
}

// ---------------------------------------------------------------- JPEG

// Reached from libjpeg through cinfo->client_data.
struct JpegSession {
  jpeg_error_mgr err{};
  jpeg_source_mgr src{};
  std::jmp_buf jump{};
  char error[JMSG_LENGTH_MAX] = {};
  std::vector<uint8_t> row;  // one decoded scanline [width, components]
};

[[noreturn]] void jpeg_fail_with(j_common_ptr cinfo, const char* msg) {
  auto* s = static_cast<JpegSession*>(cinfo->client_data);
  std::snprintf(s->error, sizeof(s->error), "%s", msg);
  std::longjmp(s->jump, 1);
}

void jpeg_on_error(j_common_ptr cinfo) {
  char msg[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, msg);
  jpeg_fail_with(cinfo, msg);
}

void jpeg_quiet(j_common_ptr) {}  // libjpeg's default prints warnings to stderr

// The whole file is in memory from the start, so asking for more means it is
// truncated. libjpeg's own memory source would instead warn and invent an EOI
// marker, decoding the rest as gray; Pillow reports "image file is truncated".
boolean jpeg_source_empty(j_decompress_ptr cinfo) {
  jpeg_fail_with(reinterpret_cast<j_common_ptr>(cinfo), "data is truncated");
}

void jpeg_source_skip(j_decompress_ptr cinfo, long n) {
  if (n <= 0) return;
  jpeg_source_mgr* src = cinfo->src;
  if (size_t(n) > src->bytes_in_buffer) jpeg_source_empty(cinfo);
  src->next_input_byte += n;
  src->bytes_in_buffer -= size_t(n);
}

void jpeg_source_noop(j_decompress_ptr) {}

// Pillow reads CMYK JPEGs as "CMYK;I" (Adobe's inverted polarity, always) and
// converts to RGB as 255 - K' - C' * (255 - K') / 255 with K' = 255 - K, in
// integer arithmetic rounded as its MULDIV255 macro does.
void cmyk_to_rgb(const uint8_t* in, uint8_t* out, int32_t width) {
  for (int32_t x = 0; x < width; ++x, in += 4, out += 3) {
    const int not_k = in[3];  // 255 - (255 - K)
    for (int c = 0; c < 3; ++c) {
      const int t = (255 - in[c]) * not_k + 128;
      const int v = not_k - (((t >> 8) + t) >> 8);
      out[c] = uint8_t(v < 0 ? 0 : v);
    }
  }
}

// The only function that calls setjmp for libjpeg.
void jpeg_read_pixels(jpeg_decompress_struct& cinfo, JpegSession& s, const ImageLimits& limits, Image& img) {
  if (setjmp(s.jump)) fail(Errc::bad_format, std::string("JPEG: ") + s.error);
  jpeg_create_decompress(&cinfo);  // keeps cinfo.err and cinfo.client_data
  cinfo.src = &s.src;
  jpeg_read_header(&cinfo, TRUE);
  check_dimensions("JPEG", cinfo.image_width, cinfo.image_height, limits);
  // Pillow's choices: 1 component is L, 3 are RGB (libjpeg converts YCbCr,
  // or not when an Adobe marker says RGB), 4 are CMYK (YCCK converted to
  // CMYK by libjpeg). Library defaults otherwise (islow DCT, fancy
  // upsampling, block smoothing), as Pillow leaves them.
  switch (cinfo.num_components) {
    case 1:
      cinfo.out_color_space = JCS_GRAYSCALE;
      break;
    case 3:
      cinfo.out_color_space = JCS_RGB;
      break;
    case 4:
      cinfo.out_color_space = JCS_CMYK;
      break;
    default:
      fail(Errc::unsupported, "JPEG with " + std::to_string(cinfo.num_components) + " color components");
  }
  jpeg_start_decompress(&cinfo);
  const int32_t width = int32_t(cinfo.output_width), height = int32_t(cinfo.output_height);
  const int comps = cinfo.output_components;
  img.width = width;
  img.height = height;
  img.rgb.resize(size_t(width) * height * 3);
  s.row.resize(size_t(width) * comps);
  while (cinfo.output_scanline < cinfo.output_height) {
    uint8_t* out = img.rgb.data() + size_t(cinfo.output_scanline) * width * 3;
    JSAMPROW row = s.row.data();
    jpeg_read_scanlines(&cinfo, &row, 1);
    if (comps == 4) {
      cmyk_to_rgb(s.row.data(), out, width);
    } else if (comps == 1) {
      for (int32_t x = 0; x < width; ++x) out[3 * x] = out[3 * x + 1] = out[3 * x + 2] = s.row[x];
    } else {
      std::memcpy(out, s.row.data(), size_t(width) * 3);
    }
  }
  // No jpeg_finish_decompress, as Pillow does not insist on it either: it
  // would read on to the EOI marker. (A file cut just before EOI still fails
  // in both: the entropy decoder's look-ahead asks for bytes that are not there.)
}

Image decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  JpegSession s;
  jpeg_decompress_struct cinfo{};
  cinfo.err = jpeg_std_error(&s.err);
  s.err.error_exit = jpeg_on_error;
  s.err.output_message = jpeg_quiet;
  cinfo.client_data = &s;
  s.src.next_input_byte = bytes.data();
  s.src.bytes_in_buffer = bytes.size();
  s.src.init_source = jpeg_source_noop;
  s.src.fill_input_buffer = jpeg_source_empty;
  s.src.skip_input_data = jpeg_source_skip;
  s.src.resync_to_restart = jpeg_resync_to_restart;
  s.src.term_source = jpeg_source_noop;
  struct Release {
    jpeg_decompress_struct* cinfo;
    ~Release() { jpeg_destroy_decompress(cinfo); }  // safe before create: cinfo->mem is null
  } release{&cinfo};
  Image img;
  jpeg_read_pixels(cinfo, s, limits, img);
  return img;
}

// ---------------------------------------------------------------- composite

#else  // TROUPE_HAVE_IMAGE_CODECS

// A build without libpng or libjpeg (a machine that lacked them when Troupe
// was built) recognizes the formats but cannot decode them.
Image decode_png(std::span<const uint8_t>, const ImageLimits&) {
  fail(Errc::unsupported, "PNG: this build of Troupe has no PNG decoder (libpng was not found when it was built)");
}

Image decode_jpeg(std::span<const uint8_t>, const ImageLimits&) {
  fail(Errc::unsupported, "JPEG: this build of Troupe has no JPEG decoder (libjpeg was not found when it was built)");
}

#endif  // TROUPE_HAVE_IMAGE_CODECS

// One colour sample of Pillow's ImagingAlphaComposite(dst, src) with dst
// opaque white (255 in every band), step by step. Why fixed point: Pillow
// blends in 32-bit integers, with coefficients carrying 7 fractional bits and
// division by 255 done as a rounding shift-and-add; repeating those steps
// makes every byte Pillow's by construction. (Over opaque white they happen to
// equal round((value * alpha + 255 * (255 - alpha)) / 255) at all 65536
// pairs, which the tests check against Pillow, but the equality should not
// rest on that, nor on how a float blend would round.)
uint8_t over_white(uint32_t value, uint32_t alpha) {
  constexpr uint32_t kDst = 255, kDstAlpha = 255;
  constexpr uint32_t kBits = 7;  // Pillow's PRECISION_BITS
  // A fully transparent source: Pillow copies the destination pixel.
  if (alpha == 0) return uint8_t(kDst);
  const uint32_t blend = kDstAlpha * (255 - alpha);
  const uint32_t out_alpha255 = alpha * 255 + blend;  // 255 * 255 over an opaque destination
  const uint32_t src_coef = alpha * 255 * 255 * (1u << kBits) / out_alpha255;
  const uint32_t dst_coef = 255 * (1u << kBits) - src_coef;
  const uint32_t t = value * src_coef + kDst * dst_coef + (0x80u << kBits);
  return uint8_t((((t >> 8) + t) >> 8) >> kBits);  // (t / 255) >> kBits, rounded as Pillow's SHIFTFORDIV255
}

bool starts_with(std::span<const uint8_t> bytes, std::span<const uint8_t> magic) {
  return bytes.size() >= magic.size() && std::memcmp(bytes.data(), magic.data(), magic.size()) == 0;
}

}  // namespace

bool image_codecs_available() { return TROUPE_HAVE_IMAGE_CODECS != 0; }

Image decode_image(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  if (bytes.empty()) fail(Errc::invalid_argument, "no data (0 bytes)");
  if (limits.max_pixels <= 0) fail(Errc::invalid_argument, "ImageLimits.max_pixels must be positive");
  if (starts_with(bytes, kPngSignature)) return decode_png(bytes, limits);
  if (starts_with(bytes, kJpegSignature)) return decode_jpeg(bytes, limits);
  // A file cut inside its signature is a truncated file, not another format.
  if (bytes.size() < sizeof(kPngSignature) && std::memcmp(bytes.data(), kPngSignature, bytes.size()) == 0) {
    fail(Errc::bad_format, "PNG: data is truncated");
  }
  if (bytes.size() < sizeof(kJpegSignature) && std::memcmp(bytes.data(), kJpegSignature, bytes.size()) == 0) {
    fail(Errc::bad_format, "JPEG: data is truncated");
  }
  fail(Errc::unsupported, "unsupported format (expected PNG or JPEG)");
}

Image composite_on_white(const Image& image) {
  const size_t pixels = size_t(std::max(image.width, 0)) * size_t(std::max(image.height, 0));
  if (image.width <= 0 || image.height <= 0 || image.rgb.size() != pixels * 3) {
    fail(Errc::invalid_argument, "composite of an image whose rgb buffer is not width * height * 3");
  }
  if (!image.alpha.empty() && image.alpha.size() != pixels) {
    fail(Errc::invalid_argument, "composite of an image whose alpha buffer is not width * height");
  }
  Image out{.width = image.width, .height = image.height, .rgb = image.rgb};
  if (image.alpha.empty()) return out;
  for (size_t i = 0; i < pixels; ++i) {
    for (size_t c = 0; c < 3; ++c) out.rgb[3 * i + c] = over_white(image.rgb[3 * i + c], image.alpha[i]);
  }
  return out;
}

}  // namespace troupe::vision
