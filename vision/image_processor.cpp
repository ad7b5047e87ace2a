// preprocessor_config.json parsing and transformers' PIL-backend pipeline:
// composite onto white -> Pillow resize (uint8) -> center crop (zero pad) ->
// rescale -> normalize, each step in the precision transformers uses, so the
// output is bit-equal.
#include "vision/image_processor.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numbers>
#include <span>
#include <sstream>

#include "core/error.hpp"

namespace troupe::vision {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------- config

// Class defaults of the processors whose steps are exactly resize, center
// crop, rescale, normalize (transformers 5.24's *ImageProcessorPil classes).
// default_to_square decides what an integer "size" means.
struct TypeDefaults {
  const char* name;
  bool default_to_square;
  int32_t shortest_edge, resize_height, resize_width;
  Resample resample;
  bool do_center_crop;
  int32_t crop;  // square crop_size; 0 = none
  std::array<float, 3> mean, std;
};

// No vision tower takes a side near this; it keeps sizes far from int32
// overflow and the output tensor within a few GB.
constexpr int64_t kMaxSide = 16384;

constexpr std::array<float, 3> kClipMean = {0.48145466f, 0.4578275f, 0.40821073f};
constexpr std::array<float, 3> kClipStd = {0.26862954f, 0.26130258f, 0.27577711f};
constexpr std::array<float, 3> kHalf = {0.5f, 0.5f, 0.5f};

constexpr TypeDefaults kTypes[] = {
    {"CLIPImageProcessor", false, 224, 0, 0, Resample::bicubic, true, 224, kClipMean, kClipStd},
    {"BitImageProcessor", false, 224, 0, 0, Resample::bicubic, true, 224, kClipMean, kClipStd},  // DINOv2
    {"SiglipImageProcessor", false, 0, 224, 224, Resample::bicubic, false, 0, kHalf, kHalf},
    {"ViTImageProcessor", true, 0, 224, 224, Resample::bilinear, false, 0, kHalf, kHalf},
    {"BlipImageProcessor", true, 0, 384, 384, Resample::bicubic, false, 0, kClipMean, kClipStd},
    {"Gemma3ImageProcessor", true, 0, 224, 224, Resample::bilinear, false, 0, kHalf, kHalf},
};

// Keys whose non-default values would change the output in ways not done
// here; refused rather than ignored.
constexpr const char* kRefusedIfTrue[] = {"do_pad", "use_square_size", "do_reduce_labels", "do_flip_channel_order",
                                          "do_pan_and_scan"};  // Gemma 3's extra crops of wide images

struct Reader {
  const json& j;
  std::string source;

  [[noreturn]] void fail(Errc code, const std::string& key, const std::string& what) const {
    throw Error(code, source + ": \"" + key + "\" " + what);
  }
  // A key that is absent or null takes the class default, as transformers does.
  const json* find(const char* key) const {
    auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  void read_bool(const char* key, bool& out) const {
    if (const json* v = find(key)) {
      if (!v->is_boolean()) fail(Errc::bad_format, key, "must be true or false");
      out = v->get<bool>();
    }
  }
  int32_t positive_int(const json& v, const std::string& key) const {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > kMaxSide) {
      fail(Errc::bad_format, key,
           "must be a positive integer (at most " + std::to_string(kMaxSide) + "), got " + v.dump());
    }
    return int32_t(v.get<int64_t>());
  }
  double number(const json& v, const std::string& key) const {
    if (!v.is_number() || !std::isfinite(v.get<double>())) fail(Errc::bad_format, key, "must be a finite number");
    return v.get<double>();
  }
  // image_mean / image_std: one number for all channels, or one per channel.
  void read_triple(const char* key, std::array<float, 3>& out) const {
    const json* v = find(key);
    if (v == nullptr) return;
    if (v->is_number()) {
      out.fill(float(number(*v, key)));
      return;
    }
    if (!v->is_array() || v->size() != 3) fail(Errc::bad_format, key, "must be a number or a list of 3 numbers");
    for (size_t c = 0; c < 3; ++c) out[c] = float(number((*v)[c], key));
  }
  // Accepts {"height", "width"}, [height, width] and, for crop_size or when
  // square_int, a plain integer.
  bool read_height_width(const json& v, const std::string& key, bool square_int, int32_t& h, int32_t& w) const {
    if (v.is_number_integer() && square_int) {
      h = w = positive_int(v, key);
      return true;
    }
    if (v.is_array() && v.size() == 2) {
      h = positive_int(v[0], key + "[0]");
      w = positive_int(v[1], key + "[1]");
      return true;
    }
    if (v.is_object() && v.size() == 2 && v.contains("height") && v.contains("width")) {
      h = positive_int(v["height"], key + ".height");
      w = positive_int(v["width"], key + ".width");
      return true;
    }
    return false;
  }
};

const TypeDefaults& find_type(const Reader& r, std::string& type_name) {
  const json* v = r.find("image_processor_type");
  if (v == nullptr) r.fail(Errc::bad_format, "image_processor_type", "is missing");
  if (!v->is_string()) r.fail(Errc::bad_format, "image_processor_type", "must be a string");
  type_name = v->get<std::string>();
  std::string base = type_name;
  for (const char* suffix : {"Fast", "Pil"}) {
    if (base.ends_with(suffix)) base.resize(base.size() - std::strlen(suffix));
  }
  for (const TypeDefaults& t : kTypes) {
    if (base == t.name) return t;
  }
  std::string known;
  for (const TypeDefaults& t : kTypes) known += std::string(known.empty() ? "" : ", ") + t.name;
  r.fail(Errc::unsupported, "image_processor_type",
         "is \"" + type_name + "\"; supported: " + known + " (also with a Fast or Pil suffix)");
}

void read_size(const Reader& r, bool default_to_square, ImageProcessorConfig& c) {
  const json* v = r.find("size");
  if (v == nullptr) return;
  if (v->is_number_integer() && !default_to_square) {
    c.shortest_edge = r.positive_int(*v, "size");
    c.resize_height = c.resize_width = 0;
    return;
  }
  if (v->is_object() && v->size() == 1 && v->contains("shortest_edge")) {
    c.shortest_edge = r.positive_int((*v)["shortest_edge"], "size.shortest_edge");
    c.resize_height = c.resize_width = 0;
    return;
  }
  if (r.read_height_width(*v, "size", default_to_square, c.resize_height, c.resize_width)) {
    c.shortest_edge = 0;
    return;
  }
  if (v->is_object()) {
    r.fail(Errc::unsupported, "size",
           "is " + v->dump() + "; supported: {\"shortest_edge\": N} or {\"height\": H, \"width\": W}");
  }
  r.fail(Errc::bad_format, "size", "must be an integer, [height, width] or an object, got " + v->dump());
}

void read_resample(const Reader& r, Resample& out) {
  const json* v = r.find("resample");
  if (v == nullptr) return;
  if (!v->is_number_integer()) r.fail(Errc::bad_format, "resample", "must be an integer (PIL filter number)");
  switch (v->get<int64_t>()) {
    case 1:
      out = Resample::lanczos;
      return;
    case 2:
      out = Resample::bilinear;
      return;
    case 3:
      out = Resample::bicubic;
      return;
    default:
      r.fail(Errc::unsupported, "resample",
             "is " + v->dump() +
                 "; supported: 1 (lanczos), 2 (bilinear), 3 (bicubic); not 0 (nearest), "
                 "4 (box), 5 (hamming)");
  }
}

ImageProcessorConfig parse_config(const json& j, const std::string& source) {
  if (!j.is_object()) throw Error(Errc::bad_format, source + ": not a JSON object");
  const Reader r{j, source};
  ImageProcessorConfig c;
  const TypeDefaults& t = find_type(r, c.processor_type);
  c.shortest_edge = t.shortest_edge;
  c.resize_height = t.resize_height;
  c.resize_width = t.resize_width;
  c.resample = t.resample;
  c.do_center_crop = t.do_center_crop;
  c.crop_height = c.crop_width = t.crop;
  c.image_mean = t.mean;
  c.image_std = t.std;

  for (const char* key : kRefusedIfTrue) {
    if (const json* v = r.find(key); v != nullptr && !v->is_null() && *v != false) {
      r.fail(Errc::unsupported, key, "is not supported");
    }
  }
  bool default_to_square = t.default_to_square;
  r.read_bool("default_to_square", default_to_square);
  r.read_bool("do_resize", c.do_resize);
  read_size(r, default_to_square, c);
  read_resample(r, c.resample);
  r.read_bool("do_center_crop", c.do_center_crop);
  if (const json* v = r.find("crop_size")) {
    if (!r.read_height_width(*v, "crop_size", true, c.crop_height, c.crop_width)) {
      r.fail(Errc::bad_format, "crop_size", "must be an integer, [height, width] or {\"height\", \"width\"}");
    }
  }
  if (c.do_center_crop && c.crop_height == 0) r.fail(Errc::bad_format, "crop_size", "is needed by do_center_crop");
  r.read_bool("do_rescale", c.do_rescale);
  if (const json* v = r.find("rescale_factor")) c.rescale_factor = r.number(*v, "rescale_factor");
  r.read_bool("do_normalize", c.do_normalize);
  r.read_triple("image_mean", c.image_mean);
  r.read_triple("image_std", c.image_std);
  for (float s : c.image_std) {
    if (s == 0.0f) r.fail(Errc::bad_format, "image_std", "must not be 0");
  }
  r.read_bool("do_convert_rgb", c.do_convert_rgb);
  return c;
}

// ---------------------------------------------------------------- Pillow resize
//
// Pillow resamples 8-bit images in two separable passes (horizontal, then
// vertical) with filter weights computed in double, then converted to fixed
// point with 22 fractional bits; each pass sums integers and rounds and clips
// its result to uint8. The intermediate uint8 rounding and the fixed-point
// weights are why a float implementation differs from Pillow by 1 in many
// bytes, so this follows its arithmetic step by step. The double arithmetic
// below must not be contracted into FMAs: the project builds with
// -std=c++20 (not gnu++20), where GCC keeps -ffp-contract=off.

constexpr int kPrecisionBits = 32 - 8 - 2;  // two bits of headroom for negative lobes and sums over 1

double bilinear_weight(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

// Keys' cubic convolution with a = -0.5, written as Pillow evaluates it.
double bicubic_weight(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * std::numbers::pi;
  return std::sin(x) / x;
}

double lanczos_weight(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

struct Filter {
  double (*weight)(double);
  double support;  // half-width at scale 1, in input pixels
};

Filter filter_of(Resample r) {
  switch (r) {
    case Resample::lanczos:
      return {lanczos_weight, 3.0};
    case Resample::bilinear:
      return {bilinear_weight, 1.0};
    case Resample::bicubic:
      return {bicubic_weight, 2.0};
  }
  throw Error(Errc::invalid_argument, "image: unknown resample filter");
}

// Weights of one pass: output pixel i reads `count[i]` input pixels from
// `first[i]` with fixed-point weights k[i * ksize + j].
struct Coefficients {
  int ksize = 0;
  std::vector<int32_t> first, count;  // [out_size]
  std::vector<int32_t> k;             // [out_size, ksize]
};

// When shrinking, the filter is stretched by the scale factor (support and
// argument both), which is Pillow's antialiasing: every input pixel under the
// wider window contributes.
Coefficients coefficients(int in_size, int out_size, const Filter& f) {
  const double scale = double(in_size) / out_size;
  const double filterscale = std::max(scale, 1.0);
  const double support = f.support * filterscale;
  Coefficients c;
  c.ksize = int(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.k.assign(size_t(out_size) * c.ksize, 0);
  std::vector<double> w(c.ksize);
  for (int xx = 0; xx < out_size; ++xx) {
    const double center = (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    const int xmin = std::max(int(center - support + 0.5), 0);  // int(): truncation, as in C
    const int xmax = std::min(int(center + support + 0.5), in_size) - xmin;
    double total = 0.0;
    for (int x = 0; x < xmax; ++x) {
      w[x] = f.weight((x + xmin - center + 0.5) * ss);
      total += w[x];
    }
    for (int x = 0; x < xmax; ++x) {
      const double v = total != 0.0 ? w[x] / total : w[x];
      const double fixed = v * (1 << kPrecisionBits);
      c.k[size_t(xx) * c.ksize + x] = int32_t(v < 0 ? -0.5 + fixed : 0.5 + fixed);
    }
    c.first[xx] = xmin;
    c.count[xx] = std::max(xmax, 0);
  }
  return c;
}

uint8_t clip8(int32_t acc) {
  const int32_t v = acc >> kPrecisionBits;  // arithmetic shift: floor, as Pillow's table lookup
  return uint8_t(std::clamp(v, 0, 255));
}

// Rows [row0, row0 + out.height) of `in` resampled along x into `out`.
void resample_horizontal(const Image& in, int32_t row0, const Coefficients& c, Image& out) {
  for (int32_t y = 0; y < out.height; ++y) {
    const uint8_t* src = in.rgb.data() + size_t(y + row0) * in.width * 3;
    uint8_t* dst = out.rgb.data() + size_t(y) * out.width * 3;
    for (int32_t x = 0; x < out.width; ++x) {
      const int32_t* k = c.k.data() + size_t(x) * c.ksize;
      const uint8_t* p = src + size_t(c.first[x]) * 3;
      int32_t acc[3] = {1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1), 1 << (kPrecisionBits - 1)};
      for (int32_t j = 0; j < c.count[x]; ++j) {
        for (int ch = 0; ch < 3; ++ch) acc[ch] += int32_t(p[3 * j + ch]) * k[j];
      }
      for (int ch = 0; ch < 3; ++ch) dst[3 * x + ch] = clip8(acc[ch]);
    }
  }
}

// `in` resampled along y into `out`; c.first is relative to in's first row.
void resample_vertical(const Image& in, const Coefficients& c, Image& out) {
  const size_t stride = size_t(in.width) * 3;
  for (int32_t y = 0; y < out.height; ++y) {
    const int32_t* k = c.k.data() + size_t(y) * c.ksize;
    const uint8_t* src = in.rgb.data() + size_t(c.first[y]) * stride;
    uint8_t* dst = out.rgb.data() + size_t(y) * stride;
    for (size_t i = 0; i < stride; ++i) {
      int32_t acc = 1 << (kPrecisionBits - 1);
      for (int32_t j = 0; j < c.count[y]; ++j) acc += int32_t(src[j * stride + i]) * k[j];
      dst[i] = clip8(acc);
    }
  }
}

Image blank(int32_t width, int32_t height) {
  return Image{.width = width, .height = height, .rgb = std::vector<uint8_t>(size_t(width) * height * 3)};
}

}  // namespace

ImageProcessorConfig parse_image_processor_config(std::string_view json_text, std::string_view source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {  // also out_of_range: a number past a double
    throw Error(Errc::bad_format, std::string(source) + ": not valid JSON: " + e.what());
  }
  return parse_config(j, std::string(source));
}

ImageProcessorConfig load_image_processor_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(Errc::io, path + ": cannot read");
  return parse_image_processor_config(text.str(), path);
}

PixelSize resized_size(const ImageProcessorConfig& config, int32_t height, int32_t width) {
  if (height <= 0 || width <= 0) {
    throw Error(Errc::invalid_argument,
                "image: size " + std::to_string(width) + "x" + std::to_string(height) + " has no pixels");
  }
  if (!config.do_resize) return {height, width};
  if (config.shortest_edge <= 0) return {config.resize_height, config.resize_width};
  // transformers' get_resize_output_image_size(default_to_square=False):
  // int(size * long / short), a float division truncated. The product is
  // exact in int64 and both operands exact in double, as in Python.
  const bool portrait = width <= height;
  const int64_t short_side = portrait ? width : height, long_side = portrait ? height : width;
  const double exact_long = double(int64_t(config.shortest_edge) * long_side) / double(short_side);
  if (exact_long >= double(kMaxSide) + 1) {
    throw Error(Errc::invalid_argument, "image: " + std::to_string(width) + "x" + std::to_string(height) +
                                            " is too elongated: its long side would resize past " +
                                            std::to_string(kMaxSide) + " pixels");
  }
  const auto new_long = int32_t(exact_long);
  return portrait ? PixelSize{new_long, config.shortest_edge} : PixelSize{config.shortest_edge, new_long};
}

PixelSize output_size(const ImageProcessorConfig& config, int32_t height, int32_t width) {
  if (config.do_center_crop) {
    resized_size(config, height, width);  // the same checks on the input
    return {config.crop_height, config.crop_width};
  }
  return resized_size(config, height, width);
}

std::optional<PixelSize> fixed_output_size(const ImageProcessorConfig& config) {
  if (config.do_center_crop) return PixelSize{config.crop_height, config.crop_width};
  if (config.do_resize && config.shortest_edge <= 0) return PixelSize{config.resize_height, config.resize_width};
  return std::nullopt;
}

Image resize_like_pillow(const Image& image, int32_t width, int32_t height, Resample filter) {
  if (image.width <= 0 || image.height <= 0 || image.rgb.size() != size_t(image.width) * image.height * 3) {
    throw Error(Errc::invalid_argument, "image: resize of an image whose rgb buffer is not width * height * 3");
  }
  if (width <= 0 || height <= 0) throw Error(Errc::invalid_argument, "image: resize to an empty size");
  const Filter f = filter_of(filter);
  // Like Pillow, a pass whose size does not change is skipped (not run as an
  // identity filter), and the horizontal pass only covers the rows the
  // vertical one reads.
  const bool need_horizontal = width != image.width;
  const bool need_vertical = height != image.height;
  // Pillow 13 runs the vertical pass first when the height loses more than
  // twice as many pixels as the width does (earlier Pillows: always the
  // horizontal one). The uint8 rounding between the passes makes the order
  // visible: the other order is a byte or two off.
  const int32_t rows_lost = image.height - height;
  if (need_horizontal && rows_lost > 0 && int64_t{rows_lost} > 2 * (int64_t{image.width} - width)) {
    Image tall = blank(image.width, height);
    resample_vertical(image, coefficients(image.height, height, f), tall);
    Image out = blank(width, height);
    resample_horizontal(tall, 0, coefficients(image.width, width, f), out);
    return out;
  }
  Coefficients vert = coefficients(image.height, height, f);
  const int32_t row_first = vert.first.front();
  const int32_t row_last = vert.first.back() + vert.count.back();
  Image current;
  const Image* in = &image;
  if (need_horizontal) {
    const Coefficients horiz = coefficients(image.width, width, f);
    for (int32_t& first : vert.first) first -= row_first;
    current = blank(width, row_last - row_first);
    resample_horizontal(image, row_first, horiz, current);
    in = &current;
  }
  if (need_vertical) {
    Image out = blank(in->width, height);
    resample_vertical(*in, vert, out);
    return out;
  }
  if (in == &image) return Image{.width = image.width, .height = image.height, .rgb = image.rgb};  // no alpha
  return current;
}

std::vector<float> preprocess(const Image& image, const ImageProcessorConfig& config) {
  if (image.width <= 0 || image.height <= 0 || image.rgb.size() != size_t(image.width) * image.height * 3) {
    throw Error(Errc::invalid_argument, "image: preprocess of an image whose rgb buffer is not width * height * 3");
  }
  if (!image.alpha.empty() && image.alpha.size() != size_t(image.width) * image.height) {
    throw Error(Errc::invalid_argument, "image: preprocess of an image whose alpha buffer is not width * height");
  }
  const PixelSize rs = resized_size(config, image.height, image.width);
  // transformers' convert_to_rgb (do_convert_rgb) composites a transparent
  // image onto white before anything else, as vLLM does. Without it,
  // transformers keeps the file's bands as they are (4 for RGBA, which its
  // 3-channel normalization cannot take); here the alpha is dropped and the
  // colour used as it is.
  Image composited;
  const Image* input = &image;
  if (config.do_convert_rgb && !image.alpha.empty()) {
    composited = composite_on_white(image);
    input = &composited;
  }
  Image resized;
  const Image* src = input;
  if (config.do_resize && (rs.width != image.width || rs.height != image.height)) {
    resized = resize_like_pillow(*input, rs.width, rs.height, config.resample);
    src = &resized;
  }
  const PixelSize out = output_size(config, image.height, image.width);
  // Center crop offsets: floor((size - crop) / 2), negative where the image is
  // smaller than the crop; those pixels are transformers' zero padding.
  const auto floor_half = [](int32_t d) { return d >= 0 ? d / 2 : -((-d + 1) / 2); };
  const int32_t top = config.do_center_crop ? floor_half(src->height - out.height) : 0;
  const int32_t left = config.do_center_crop ? floor_half(src->width - out.width) : 0;

  // Per-byte value lookup: transformers rescales in float64 and rounds to
  // float32 once, then normalizes in float32 ((x - mean) / std, two roundings).
  std::array<std::array<float, 256>, 3> value{};
  for (int ch = 0; ch < 3; ++ch) {
    for (int v = 0; v < 256; ++v) {
      float x = config.do_rescale ? float(double(v) * config.rescale_factor) : float(v);
      if (config.do_normalize) x = (x - config.image_mean[ch]) / config.image_std[ch];
      value[ch][v] = x;
    }
  }
  const size_t plane = size_t(out.pixels());
  std::vector<float> pixels(3 * plane);  // [3, H, W]
  for (int32_t y = 0; y < out.height; ++y) {
    const int32_t sy = y + top;
    for (int32_t x = 0; x < out.width; ++x) {
      const int32_t sx = x + left;
      const bool inside = sy >= 0 && sy < src->height && sx >= 0 && sx < src->width;
      const uint8_t* p = inside ? src->rgb.data() + (size_t(sy) * src->width + sx) * 3 : nullptr;
      for (int ch = 0; ch < 3; ++ch) pixels[ch * plane + size_t(y) * out.width + x] = value[ch][p ? p[ch] : 0];
    }
  }
  return pixels;
}

}  // namespace troupe::vision
