// quantization_config: the FP8 methods, GPTQ, AWQ, compressed-tensors' FP8,
// int8 and packed 4-bit formats, and the refusal of every other method.
#include "model/hf_quantization.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

#include "core/error.hpp"

namespace troupe {
namespace {

using Json = nlohmann::json;

// The type the dequantized matrices take: the checkpoint's own, as
// transformers gives them the model's dtype.
DType checkpoint_dtype(const HfConfig& cfg) {
  const std::string name = cfg.get_string("dtype", cfg.get_string("torch_dtype", "bfloat16"));
  if (name == "float32") return DType::f32;
  if (name == "float16") return DType::f16;
  return DType::bf16;
}

// w[key], or null where w has no such key (a const JSON object's [] must
// not be asked for a missing one).
Json field(const Json& w, const char* key) { return w.is_object() && w.contains(key) ? w[key] : Json(); }

std::string string_field(const Json& w, const char* key, const std::string& fallback) {
  const Json v = field(w, key);
  return v.is_string() ? v.get<std::string>() : fallback;
}

constexpr const char* kInstead = ". Use a GGUF file, or the unquantized checkpoint with --quantize";

// A [rows, cols] pair of positive block sizes; Error(bad_format) otherwise.
std::pair<int64_t, int64_t> block_pair(const HfConfig& cfg, const Json& v, const char* key) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() ||
      v[0].get<int64_t>() <= 0 || v[1].get<int64_t>() <= 0) {
    cfg.fail(Errc::bad_format, std::string("quantization_config: '") + key + "' is not a pair of positive integers");
  }
  return {v[0].get<int64_t>(), v[1].get<int64_t>()};
}

HfQuantScheme read_fp8_method(const HfConfig& cfg, const Json& q) {
  HfQuantScheme s{.kind = HfQuantScheme::Kind::fp8, .scale_suffix = "weight_scale_inv", .to = checkpoint_dtype(cfg)};
  // DeepSeek writes "e4m3", MiniMax "float8_e4m3fn".
  const Json fmt = field(q, "fmt");
  if (!fmt.is_null() && fmt != "e4m3" && fmt != "float8_e4m3fn") {
    cfg.fail(Errc::unsupported, "quantization_config: FP8 format " + fmt.dump() +
                                    " is not supported; supported: e4m3 (float8_e4m3fn)");
  }
  if (const Json block = field(q, "weight_block_size"); !block.is_null()) {
    std::tie(s.block_rows, s.block_cols) = block_pair(cfg, block, "weight_block_size");
  }
  return s;
}

// An integer key that one of two spellings may give (AWQ's older configs
// say "w_bit" and "q_group_size").
int64_t int_key(const HfConfig& cfg, const Json& q, const char* key, const char* alt, int64_t fallback) {
  for (const char* k : {key, alt}) {
    const Json v = field(q, k);
    if (v.is_null()) continue;
    if (!v.is_number_integer()) cfg.fail(Errc::bad_format, std::string("quantization_config: '") + k + "' is not an integer");
    return v.get<int64_t>();
  }
  return fallback;
}

// GPTQ and AWQ: 4-bit groups of group_size inputs (-1: a group per row).
HfQuantScheme read_gptq_awq(const HfConfig& cfg, const Json& q, HfQuantScheme::Kind kind) {
  const char* method = kind == HfQuantScheme::Kind::gptq ? "gptq" : "awq";
  const int64_t bits = int_key(cfg, q, "bits", "w_bit", -1);
  if (bits < 0) cfg.fail(Errc::bad_format, std::string("quantization_config: ") + method + " without 'bits'");
  if (bits != 4) {
    cfg.fail(Errc::unsupported, std::string("quantization_config: ") + method + " with " + std::to_string(bits) +
                                    "-bit weights is not supported; supported: 4" + kInstead);
  }
  HfQuantScheme s{.kind = kind, .to = checkpoint_dtype(cfg)};
  const int64_t group = int_key(cfg, q, "group_size", "q_group_size", -1);
  if (group == 0 || group < -1) cfg.fail(Errc::bad_format, "quantization_config: group_size " + std::to_string(group));
  s.group_size = group < 0 ? 0 : group;
  if (kind == HfQuantScheme::Kind::gptq) {
    const std::string format = string_field(q, "checkpoint_format", "gptq");
    if (format != "gptq" && format != "gptq_v2") {
      cfg.fail(Errc::unsupported, "quantization_config: GPTQ checkpoint_format '" + format +
                                      "' is not supported; supported: gptq, gptq_v2" + kInstead);
    }
    s.zero_offset = format == "gptq" ? 1 : 0;
    return s;
  }
  const std::string version = string_field(q, "version", "gemm");
  if (version != "gemm" && version != "GEMM") {
    cfg.fail(Errc::unsupported,
             "quantization_config: AWQ version '" + version + "' is not supported; supported: gemm" + kInstead);
  }
  if (field(q, "zero_point") == false) {
    cfg.fail(Errc::unsupported,
             "quantization_config: AWQ without zero points is not supported" + std::string(kInstead));
  }
  return s;
}

// What a compressed-tensors format holds: its weights' width and type, the
// kind Troupe reads it as, and the strategies (scale grids) it takes.
struct CtFormat {
  std::string_view name;
  int64_t bits;
  std::string_view type;
  HfQuantScheme::Kind kind;
  bool tensor, group, block;  // besides "channel", which every one takes
};
constexpr CtFormat kCtFormats[] = {
    {"float-quantized", 8, "float", HfQuantScheme::Kind::fp8, true, false, true},
    {"int-quantized", 8, "int", HfQuantScheme::Kind::int8, true, true, true},
    {"naive-quantized", 8, "int", HfQuantScheme::Kind::int8, true, true, true},
    {"pack-quantized", 4, "int", HfQuantScheme::Kind::int4_packed, false, true, false},
};

// One config group's weights, as a scheme of the given format.
HfQuantScheme read_group(const HfConfig& cfg, const std::string& group, const Json& w, const CtFormat& f) {
  const std::string where = "quantization_config: group '" + group + "' ";
  if (!w.is_object()) cfg.fail(Errc::bad_format, where + "has no 'weights' object");
  const Json bits = field(w, "num_bits"), type = field(w, "type");
  if (bits != f.bits || type != f.type) {
    cfg.fail(Errc::unsupported, where + "has " + bits.dump() + "-bit " + type.dump() + " weights in " +
                                    std::string(f.name) + "; supported: " + std::to_string(f.bits) + "-bit " +
                                    std::string(f.type) + kInstead);
  }
  HfQuantScheme s{.kind = f.kind, .scale_suffix = "weight_scale", .to = checkpoint_dtype(cfg)};
  s.symmetric = field(w, "symmetric") != false;
  if (!s.symmetric && f.kind == HfQuantScheme::Kind::int8) {
    cfg.fail(Errc::unsupported, where + "has asymmetric int8 weights; supported: symmetric" + std::string(kInstead));
  }
  const std::string strategy = string_field(w, "strategy", "");
  if (strategy == "group" && f.group) {
    const Json g = field(w, "group_size");
    if (!g.is_number_integer() || g.get<int64_t>() <= 0) cfg.fail(Errc::bad_format, where + "has no positive 'group_size'");
    // A group of g inputs: int4's own groups, or an int8 grid of 1 x g blocks.
    if (f.kind == HfQuantScheme::Kind::int4_packed) {
      s.group_size = g.get<int64_t>();
    } else {
      s.block_rows = 1;
      s.block_cols = g.get<int64_t>();
    }
  } else if (strategy == "block" && f.block) {
    std::tie(s.block_rows, s.block_cols) = block_pair(cfg, field(w, "block_structure"), "block_structure");
  } else if (strategy != "channel" && !(strategy == "tensor" && f.tensor)) {
    cfg.fail(Errc::unsupported, where + "has weight strategy '" + strategy + "' in " + std::string(f.name) +
                                    "; supported: " + (f.tensor ? "tensor, " : "") + "channel" +
                                    (f.group ? ", group" : "") + (f.block ? ", block" : ""));
  }
  return s;
}

// compressed-tensors: the format (top level, or each group's own) and every
// group's weights. Activation settings are not read: Troupe keeps
// activations in float, what the weights were made to approximate.
std::optional<HfQuantScheme> read_compressed_tensors(const HfConfig& cfg, const Json& q) {
  const std::string format = string_field(q, "format", "");
  if (format == "dense") return std::nullopt;  // weights stored as plain floats
  const CtFormat* f = nullptr;
  for (const CtFormat& c : kCtFormats) {
    if (c.name == format) f = &c;
  }
  if (f == nullptr) {
    cfg.fail(Errc::unsupported, "quantization_config: compressed-tensors format '" + format +
                                    "' is not supported; supported: float-quantized (FP8), int-quantized and "
                                    "naive-quantized (int8), pack-quantized (4-bit integers)" +
                                    std::string(kInstead));
  }
  const Json groups = field(q, "config_groups");
  if (!groups.is_object() || groups.empty()) {
    cfg.fail(Errc::bad_format, "quantization_config: no 'config_groups' object");
  }
  std::optional<HfQuantScheme> scheme;
  for (const auto& [group, g] : groups.items()) {
    const HfQuantScheme s = read_group(cfg, group, field(g, "weights"), *f);
    if (scheme && (s.kind != scheme->kind || s.block_rows != scheme->block_rows || s.block_cols != scheme->block_cols ||
                   s.group_size != scheme->group_size || s.symmetric != scheme->symmetric)) {
      cfg.fail(Errc::unsupported, "quantization_config: groups quantized differently (group '" + group + "')");
    }
    scheme = s;
  }
  return scheme;
}

}  // namespace

std::optional<HfQuantScheme> read_quantization_config(const HfConfig& cfg) {
  if (!cfg.has("quantization_config")) return std::nullopt;
  const Json& q = cfg.json()["quantization_config"];
  const std::string method = string_field(q, "quant_method", "");
  if (method.empty()) cfg.fail(Errc::bad_format, "quantization_config has no 'quant_method' string");
  if (method == "fp8") return read_fp8_method(cfg, q);
  if (method == "compressed-tensors") return read_compressed_tensors(cfg, q);
  if (method == "gptq") return read_gptq_awq(cfg, q, HfQuantScheme::Kind::gptq);
  if (method == "awq") return read_gptq_awq(cfg, q, HfQuantScheme::Kind::awq);
  if (method == "mxfp4") return std::nullopt;  // gpt-oss's experts, read by its architecture
  cfg.fail(Errc::unsupported, "quantization method '" + method +
                                  "' is not supported; supported: fp8, gptq and awq (4-bit), compressed-tensors "
                                  "(FP8, int8 or packed 4-bit weights), mxfp4 (gpt-oss)" + std::string(kInstead));
}

std::vector<float> scale_floats(const safetensors::TensorInfo& scale) {
  if (!scale.type) {
    throw Error(Errc::unsupported,
                scale.file + ": scale '" + scale.name + "' has dtype " + scale.dtype + "; supported: F32, BF16, F16");
  }
  std::vector<uint8_t> raw(static_cast<size_t>(scale.n_bytes));
  std::memcpy(raw.data(), scale.data, raw.size());
  std::vector<float> out(static_cast<size_t>(scale.n_elements()));
  dequantize_row(*scale.type, raw.data(), out.data(), scale.n_elements());
  return out;
}

bool on_fp16_grid(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float v) { return fp16_to_f32(f32_to_fp16(v)) == v; });
}

}  // namespace troupe
