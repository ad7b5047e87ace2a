// quantization_config: the FP8 methods, GPTQ, AWQ, compressed-tensors' FP8,
// int8 and packed 4-bit formats, and the refusal of every other method.
#include "model/hf_quantization.hpp"

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
  if (q.contains("fmt") && !q["fmt"].is_null() && q["fmt"] != "e4m3" && q["fmt"] != "float8_e4m3fn") {
    cfg.fail(Errc::unsupported, "quantization_config: FP8 format " + q["fmt"].dump() +
                                    " is not supported; supported: e4m3 (float8_e4m3fn)");
  }
  if (q.contains("weight_block_size") && !q["weight_block_size"].is_null()) {
    std::tie(s.block_rows, s.block_cols) = block_pair(cfg, q["weight_block_size"], "weight_block_size");
  }
  return s;
}

// An integer key that one of two spellings may give (AWQ's older configs
// say "w_bit" and "q_group_size").
int64_t int_key(const HfConfig& cfg, const Json& q, const char* key, const char* alt, int64_t fallback) {
  for (const char* k : {key, alt}) {
    if (!q.contains(k) || q[k].is_null()) continue;
    if (!q[k].is_number_integer())
      cfg.fail(Errc::bad_format, std::string("quantization_config: '") + k + "' is not an integer");
    return q[k].get<int64_t>();
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
    const std::string format = q.contains("checkpoint_format") && q["checkpoint_format"].is_string()
                                   ? q["checkpoint_format"].get<std::string>()
                                   : "gptq";
    if (format != "gptq" && format != "gptq_v2") {
      cfg.fail(Errc::unsupported, "quantization_config: GPTQ checkpoint_format '" + format +
                                      "' is not supported; supported: gptq, gptq_v2" + kInstead);
    }
    s.zero_offset = format == "gptq" ? 1 : 0;
    return s;
  }
  const std::string version =
      q.contains("version") && q["version"].is_string() ? q["version"].get<std::string>() : "gemm";
  if (version != "gemm" && version != "GEMM") {
    cfg.fail(Errc::unsupported,
             "quantization_config: AWQ version '" + version + "' is not supported; supported: gemm" + kInstead);
  }
  if (q.contains("zero_point") && q["zero_point"] == false) {
    cfg.fail(Errc::unsupported,
             "quantization_config: AWQ without zero points is not supported" + std::string(kInstead));
  }
  return s;
}

// One config group's weights, as a scheme of the given format.
HfQuantScheme read_group(const HfConfig& cfg, const std::string& group, const Json& w, const std::string& format) {
  const std::string where = "quantization_config: group '" + group + "' ";
  if (!w.is_object()) cfg.fail(Errc::bad_format, where + "has no 'weights' object");
  const Json& bits = w.contains("num_bits") ? w["num_bits"] : Json();
  const Json& type = w.contains("type") ? w["type"] : Json();
  const std::string strategy =
      w.contains("strategy") && w["strategy"].is_string() ? w["strategy"].get<std::string>() : "";
  HfQuantScheme s{.to = checkpoint_dtype(cfg)};
  if (format == "float-quantized") {
    if (bits != 8 || type != "float") {
      cfg.fail(Errc::unsupported, where + "has " + bits.dump() + "-bit " + type.dump() +
                                      " weights in float-quantized; supported: 8-bit float");
    }
    s.kind = HfQuantScheme::Kind::fp8;
    s.scale_suffix = "weight_scale";
    if (strategy == "block") {
      std::tie(s.block_rows, s.block_cols) =
          block_pair(cfg, w.contains("block_structure") ? w["block_structure"] : Json(), "block_structure");
    } else if (strategy != "tensor" && strategy != "channel") {
      cfg.fail(Errc::unsupported, where + "has weight strategy '" + strategy + "'; supported: tensor, channel, block");
    }
    return s;
  }
  if (format == "int-quantized" || format == "naive-quantized") {
    if (bits != 8 || type != "int") {
      cfg.fail(Errc::unsupported, where + "has " + bits.dump() + "-bit " + type.dump() + " weights in " + format +
                                      "; supported: 8-bit int" + kInstead);
    }
    if (w.contains("symmetric") && w["symmetric"] == false) {
      cfg.fail(Errc::unsupported, where + "has asymmetric int8 weights; supported: symmetric" + std::string(kInstead));
    }
    s.kind = HfQuantScheme::Kind::int8;
    s.scale_suffix = "weight_scale";
    if (strategy == "group") {
      const Json& g = w.contains("group_size") ? w["group_size"] : Json();
      if (!g.is_number_integer() || g.get<int64_t>() <= 0) {
        cfg.fail(Errc::bad_format, where + "has no positive 'group_size'");
      }
      s.block_rows = 1;
      s.block_cols = g.get<int64_t>();
    } else if (strategy == "block") {
      std::tie(s.block_rows, s.block_cols) =
          block_pair(cfg, w.contains("block_structure") ? w["block_structure"] : Json(), "block_structure");
    } else if (strategy != "tensor" && strategy != "channel") {
      cfg.fail(Errc::unsupported,
               where + "has weight strategy '" + strategy + "'; supported: tensor, channel, group, block");
    }
    return s;
  }
  // pack-quantized
  if (bits != 4 || type != "int") {
    cfg.fail(Errc::unsupported, where + "has " + bits.dump() + "-bit " + type.dump() +
                                    " weights in pack-quantized; supported: 4-bit int" + kInstead);
  }
  s.kind = HfQuantScheme::Kind::int4_packed;
  s.scale_suffix = "weight_scale";
  s.symmetric = !w.contains("symmetric") || w["symmetric"] != false;
  if (strategy == "group") {
    const Json& g = w.contains("group_size") ? w["group_size"] : Json();
    if (!g.is_number_integer() || g.get<int64_t>() <= 0) {
      cfg.fail(Errc::bad_format, where + "has no positive 'group_size'");
    }
    s.group_size = g.get<int64_t>();
  } else if (strategy != "channel") {
    cfg.fail(Errc::unsupported,
             where + "has weight strategy '" + strategy + "' in pack-quantized; supported: group, channel");
  }
  return s;
}

// compressed-tensors: the format (top level, or each group's own) and every
// group's weights. Activation settings are not read: Troupe keeps
// activations in float, what the weights were made to approximate.
std::optional<HfQuantScheme> read_compressed_tensors(const HfConfig& cfg, const Json& q) {
  const std::string format = q.contains("format") && q["format"].is_string() ? q["format"].get<std::string>() : "";
  if (format == "dense") return std::nullopt;  // weights stored as plain floats
  if (format != "float-quantized" && format != "pack-quantized" && format != "int-quantized" &&
      format != "naive-quantized") {
    cfg.fail(Errc::unsupported, "quantization_config: compressed-tensors format '" + format +
                                    "' is not supported; supported: float-quantized (FP8), int-quantized and "
                                    "naive-quantized (int8), pack-quantized (4-bit integers)" +
                                    std::string(kInstead));
  }
  if (!q.contains("config_groups") || !q["config_groups"].is_object() || q["config_groups"].empty()) {
    cfg.fail(Errc::bad_format, "quantization_config: no 'config_groups' object");
  }
  std::optional<HfQuantScheme> scheme;
  for (const auto& [group, g] : q["config_groups"].items()) {
    const HfQuantScheme s =
        read_group(cfg, group, g.is_object() && g.contains("weights") ? g["weights"] : Json(), format);
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
  if (!q.is_object() || !q.contains("quant_method") || !q["quant_method"].is_string()) {
    cfg.fail(Errc::bad_format, "quantization_config has no 'quant_method' string");
  }
  const std::string method = q["quant_method"].get<std::string>();
  if (method == "fp8") return read_fp8_method(cfg, q);
  if (method == "compressed-tensors") return read_compressed_tensors(cfg, q);
  if (method == "gptq") return read_gptq_awq(cfg, q, HfQuantScheme::Kind::gptq);
  if (method == "awq") return read_gptq_awq(cfg, q, HfQuantScheme::Kind::awq);
  if (method == "mxfp4") return std::nullopt;  // gpt-oss's experts, read by its architecture
  cfg.fail(Errc::unsupported, "quantization method '" + method +
                                  "' is not supported; supported: fp8, gptq and awq (4-bit), compressed-tensors "
                                  "(FP8, int8 or packed 4-bit weights), mxfp4 (gpt-oss)" + std::string(kInstead));
}

}  // namespace troupe
