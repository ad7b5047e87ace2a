// quantization_config's FP8 schemes and the dequantization of float8 e4m3
// matrices at load.
#include "model/hf_fp8.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "model/weight_store.hpp"

namespace troupe {
namespace {

using Json = nlohmann::json;

std::string shape_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The type the dequantized matrices take: the checkpoint's own, as
// transformers gives them the model's dtype.
DType checkpoint_dtype(const HfConfig& cfg) {
  const std::string name = cfg.get_string("dtype", cfg.get_string("torch_dtype", "bfloat16"));
  if (name == "float32") return DType::f32;
  if (name == "float16") return DType::f16;
  return DType::bf16;
}

// A [rows, cols] pair of positive block sizes; Error(bad_format) otherwise.
std::pair<int64_t, int64_t> block_pair(const HfConfig& cfg, const Json& v, const char* key) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() ||
      v[0].get<int64_t>() <= 0 || v[1].get<int64_t>() <= 0) {
    cfg.fail(Errc::bad_format, std::string("quantization_config: '") + key + "' is not a pair of positive integers");
  }
  return {v[0].get<int64_t>(), v[1].get<int64_t>()};
}

std::optional<Fp8Scheme> read_fp8_method(const HfConfig& cfg, const Json& q) {
  Fp8Scheme s{.scale_suffix = "weight_scale_inv", .to = checkpoint_dtype(cfg)};
  // DeepSeek writes "e4m3", MiniMax "float8_e4m3fn".
  if (q.contains("fmt") && !q["fmt"].is_null() && q["fmt"] != "e4m3" && q["fmt"] != "float8_e4m3fn") {
    cfg.fail(Errc::unsupported, "quantization_config: FP8 format " + q["fmt"].dump() + " is not supported; "
                                "supported: e4m3 (float8_e4m3fn)");
  }
  if (q.contains("weight_block_size") && !q["weight_block_size"].is_null()) {
    std::tie(s.block_rows, s.block_cols) = block_pair(cfg, q["weight_block_size"], "weight_block_size");
  }
  return s;
}

// compressed-tensors: every group's weights must be 8-bit floats, in one
// strategy's grid. Its activation settings are not read: Troupe keeps
// activations in float, which is what the weights were made to approximate.
std::optional<Fp8Scheme> read_compressed_tensors(const HfConfig& cfg, const Json& q) {
  const std::string format = q.contains("format") && q["format"].is_string() ? q["format"].get<std::string>() : "";
  if (format == "dense") return std::nullopt;  // weights stored as plain floats
  if (format != "float-quantized") {
    cfg.fail(Errc::unsupported, "quantization_config: compressed-tensors format '" + format +
                                    "' is not supported; supported: float-quantized (FP8 weights). Use a GGUF "
                                    "file, or the unquantized checkpoint with --quantize");
  }
  if (!q.contains("config_groups") || !q["config_groups"].is_object() || q["config_groups"].empty()) {
    cfg.fail(Errc::bad_format, "quantization_config: no 'config_groups' object");
  }
  Fp8Scheme s{.scale_suffix = "weight_scale", .to = checkpoint_dtype(cfg)};
  bool first = true;
  for (const auto& [group, g] : q["config_groups"].items()) {
    const Json* w = g.is_object() && g.contains("weights") ? &g["weights"] : nullptr;
    if (w == nullptr || !w->is_object()) cfg.fail(Errc::bad_format, "quantization_config: group '" + group +
                                                                        "' has no 'weights' object");
    const Json& bits = (*w)["num_bits"];
    const Json& type = (*w)["type"];
    if (!bits.is_number_integer() || bits.get<int64_t>() != 8 || type != "float") {
      cfg.fail(Errc::unsupported, "quantization_config: group '" + group + "' has " + bits.dump() + "-bit " +
                                      type.dump() + " weights; supported: 8-bit float");
    }
    const std::string strategy = (*w)["strategy"].is_string() ? (*w)["strategy"].get<std::string>() : "";
    int64_t rows = 0, cols = 0;
    if (strategy == "block") {
      std::tie(rows, cols) = block_pair(cfg, (*w)["block_structure"], "block_structure");
    } else if (strategy != "tensor" && strategy != "channel") {
      cfg.fail(Errc::unsupported, "quantization_config: group '" + group + "' has weight strategy '" + strategy +
                                      "'; supported: tensor, channel, block");
    }
    if (!first && (rows != s.block_rows || cols != s.block_cols)) {
      cfg.fail(Errc::unsupported, "quantization_config: groups with different weight blocks");
    }
    s.block_rows = rows;
    s.block_cols = cols;
    first = false;
  }
  return s;
}

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[static_cast<size_t>(b)] = e4m3_to_f32(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

}  // namespace

std::optional<Fp8Scheme> read_quantization_config(const HfConfig& cfg) {
  if (!cfg.has("quantization_config")) return std::nullopt;
  const Json& q = cfg.json()["quantization_config"];
  if (!q.is_object() || !q.contains("quant_method") || !q["quant_method"].is_string()) {
    cfg.fail(Errc::bad_format, "quantization_config has no 'quant_method' string");
  }
  const std::string method = q["quant_method"].get<std::string>();
  if (method == "fp8") return read_fp8_method(cfg, q);
  if (method == "compressed-tensors") return read_compressed_tensors(cfg, q);
  if (method == "mxfp4") return std::nullopt;  // gpt-oss's experts, read by its architecture
  cfg.fail(Errc::unsupported, "quantization method '" + method +
                                  "' is not supported; supported: fp8, compressed-tensors (FP8 weights), mxfp4 "
                                  "(gpt-oss). Use a GGUF file, or the unquantized checkpoint with --quantize");
}

float e4m3_to_f32(uint8_t b) {
  const float sign = (b & 0x80u) != 0 ? -1.0f : 1.0f;
  const int exp = (b >> 3) & 0xf;
  const int mant = b & 0x7;
  if (exp == 0xf && mant == 0x7) return std::numeric_limits<float>::quiet_NaN();
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant/8 x 2^-6
  return sign * std::ldexp(static_cast<float>(8 + mant), exp - 10);     // (1 + mant/8) x 2^(exp-7)
}

Weight dequantize_fp8(const safetensors::TensorInfo& w, const safetensors::TensorInfo& scale, const Fp8Scheme& s,
                      WeightStore& store, ThreadPool& pool) {
  const int64_t n_out = w.shape.at(0), n_in = w.shape.at(1);
  if (!scale.type) {
    throw Error(Errc::unsupported, scale.file + ": scale '" + scale.name + "' has dtype " + scale.dtype +
                                       "; supported: F32, BF16, F16");
  }
  // The grid [sr, sc] of blocks [br, bc] the scale's shape names.
  const std::vector<int64_t>& sh = scale.shape;
  const int64_t n_scales = scale.n_elements();
  int64_t br = 0, bc = 0;
  if (n_scales == 1 && sh.size() <= 2) {
    br = n_out, bc = n_in;  // one per matrix
  } else if ((sh.size() == 1 && sh[0] == n_out) || (sh.size() == 2 && sh[0] == n_out && sh[1] == 1)) {
    br = 1, bc = n_in;  // one per row
  } else if (s.block_rows > 0 && sh.size() == 2 && sh[0] == (n_out + s.block_rows - 1) / s.block_rows &&
             sh[1] == (n_in + s.block_cols - 1) / s.block_cols) {
    br = s.block_rows, bc = s.block_cols;
  } else {
    std::string want = "[] or [" + std::to_string(n_out) + ", 1]";
    if (s.block_rows > 0) {
      want += " or [" + std::to_string((n_out + s.block_rows - 1) / s.block_rows) + ", " +
              std::to_string((n_in + s.block_cols - 1) / s.block_cols) + "] (blocks of " +
              std::to_string(s.block_rows) + "x" + std::to_string(s.block_cols) + ")";
    }
    throw Error(Errc::bad_format, scale.file + ": scale '" + scale.name + "' has shape " + shape_str(sh) +
                                      " for FP8 matrix '" + w.name + "' " + shape_str(w.shape) + ", expected " +
                                      want);
  }
  const int64_t sc = (n_in + bc - 1) / bc;
  std::vector<float> scales(static_cast<size_t>(n_scales));
  {
    // The file promises no alignment: copy the raw values first.
    std::vector<uint8_t> raw(static_cast<size_t>(scale.n_bytes));
    std::memcpy(raw.data(), scale.data, raw.size());
    dequantize_row(*scale.type, raw.data(), scales.data(), n_scales);
  }
  const std::array<float, 256>& lut = e4m3_table();
  const int64_t dst_row = row_bytes(s.to, n_in);
  auto* dst = static_cast<uint8_t*>(store.allocate_transient(static_cast<size_t>(dst_row * n_out)));
  pool.parallel_for(n_out, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* src = w.data + r * n_in;
      const float* rs = scales.data() + (r / br) * sc;
      for (int64_t c0 = 0; c0 < n_in; c0 += bc) {
        const float f = rs[c0 / bc];
        const int64_t c1 = std::min(c0 + bc, n_in);
        for (int64_t c = c0; c < c1; ++c) row[static_cast<size_t>(c)] = lut[src[c]] * f;
      }
      quantize_row(s.to, row.data(), dst + r * dst_row, n_in);
    }
  });
  return Weight{.data = dst, .type = s.to, .n_in = n_in, .n_out = n_out};
}

}  // namespace troupe
