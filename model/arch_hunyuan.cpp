// Hunyuan dense (HunYuanDenseV1ForCausalLM, and GGUF "hunyuan-dense" files:
// Hunyuan-0.5B to 7B): the Llama layer with per-head RMSNorms of queries and
// keys applied after RoPE (query_layernorm, key_layernorm), and its NTK
// "alpha" RoPE: rope_type dynamic with an alpha stretches the base to
// theta * alpha^(d / (d - 2)) for every length (llama.cpp's converter writes
// that base into the file).
#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

using Json = nlohmann::json;

// The config with an alpha-scaled rope replaced by the plain rope it
// amounts to, so read_rope_config reads it.
Json with_alpha_rope(const HfConfig& cfg, int64_t head_dim) {
  Json j = cfg.json();
  const char* key = j.contains("rope_parameters") ? "rope_parameters" : "rope_scaling";
  if (!j.contains(key) || !j[key].is_object()) return j;
  const Json& r = j[key];
  const std::string type = r.value("rope_type", r.value("type", std::string("default")));
  if (type != "dynamic" || !r.contains("alpha") || r["alpha"].is_null()) return j;
  const HfConfig rope(r, cfg.path() + " (" + key + ")");
  const double alpha = rope.get_float("alpha");
  const double theta = rope.get_float("rope_theta", cfg.get_float("rope_theta", 10000.0));
  if (!(alpha > 0.0) || !(theta > 0.0) || head_dim <= 2) cfg.fail(Errc::bad_format, "rope alpha and theta must be positive");
  const double d = static_cast<double>(head_dim);
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", theta * std::pow(alpha, d / (d - 2.0))}};
  return j;
}

void load_hunyuan(const HfConfig& file_cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "hunyuan-dense";
  read_decoder_sizes(file_cfg, c);  // head_dim first: the alpha base depends on it
  const HfConfig cfg(with_alpha_rope(file_cfg, c.head_dim), file_cfg.path());
  read_llama_config(cfg, c);
  check_config(cfg, c);
  c.qk_norm_after_rope = true;
  const bool bias = cfg.get_bool("attention_bias", false);
  bind_llama_weights(src, c, {.qkv_bias = bias, .o_bias = bias}, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".self_attn.";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.q_norm = src.vector(p + "query_layernorm.weight", c.head_dim);
    l.k_norm = src.vector(p + "key_layernorm.weight", c.head_dim);
  }
}

void hunyuan_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // q/k norms after RoPE
  layers::swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::hunyuan_dense{.name = "hunyuan-dense",
                                       .hf_class = "HunYuanDenseV1ForCausalLM",
                                       .load_hf = load_hunyuan,
                                       .embed = layers::embed_tokens,
                                       .layer = hunyuan_layer,
                                       .output_norm = arch::rms_output_norm};

}  // namespace troupe
