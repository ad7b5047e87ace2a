// DeepSeek-V2 and -V3 (DeepseekV2ForCausalLM: DeepSeek-V2, V2-Lite, Coder-V2;
// DeepseekV3ForCausalLM: DeepSeek-V3, R1; the layers of Kimi K2 and Moonlight): multi-head
// latent attention (layers_mla.cpp: queries from a low-rank latent or x,
// keys and values from a shared latent plus a roped part every head shares)
// and, after the first first_k_dense_replace dense layers, experts routed
// by a softmax (V2: top k, or within the best groups by their best score;
// never renormalized) or a sigmoid with a correction bias (V3: within the
// best groups by their two best scores, renormalized by norm_topk_prob),
// scaled by routed_scaling_factor, beside ungated shared experts. With YaRN
// the scores are scaled by mscale(factor, mscale_all_dim)^2 as well. The
// multi-token-prediction layers past num_hidden_layers are not read.
// GLM-4.7-Flash (Glm4MoeLiteForCausalLM) is DeepSeek-V3's layer with its
// dense and MoE layers listed in mlp_layer_types; it loads as deepseek3.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"
#include "model/rope_scaling.hpp"

namespace troupe {
namespace {

using Json = nlohmann::json;

void read_mla(const HfConfig& cfg, ModelConfig& c) {
  c.mla_q_rank = cfg.has("q_lora_rank") ? cfg.get_int("q_lora_rank") : 0;
  c.mla_kv_rank = cfg.get_int("kv_lora_rank");
  c.mla_nope_dim = cfg.get_int("qk_nope_head_dim");
  c.mla_rope_dim = cfg.get_int("qk_rope_head_dim");
  c.mla_v_dim = cfg.get_int("v_head_dim");
  if (c.mla_q_rank < 0 || c.mla_kv_rank <= 0 || c.mla_nope_dim <= 0 || c.mla_rope_dim <= 0 || c.mla_v_dim <= 0 ||
      c.mla_rope_dim % 2 != 0 || c.mla_v_dim > c.mla_nope_dim + c.mla_rope_dim) {
    cfg.fail(Errc::bad_format, "kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim (even) and v_head_dim (at most "
                               "qk_nope_head_dim + qk_rope_head_dim) must be positive");
  }
  if (cfg.get_bool("attention_bias", false)) cfg.fail(Errc::unsupported, "attention_bias is not supported");
  c.n_head_kv = c.n_head;
  // RoPE turns only the rope part: its settings are read for that width.
  c.head_dim = c.mla_rope_dim;
  read_rope_config(cfg, c);
  if (c.n_rot != c.mla_rope_dim) cfg.fail(Errc::unsupported, "partial_rotary_factor is not supported");
  c.head_dim = c.mla_nope_dim + c.mla_rope_dim;
  double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const Json& rope = cfg.has("rope_parameters") ? cfg.json()["rope_parameters"]
                     : cfg.has("rope_scaling")  ? cfg.json()["rope_scaling"]
                                                : Json();
  if (rope.is_object()) {
    const std::string type = rope.value("rope_type", rope.value("type", std::string("default")));
    const double all = rope.contains("mscale_all_dim") && rope["mscale_all_dim"].is_number()
                           ? rope["mscale_all_dim"].get<double>()
                           : 0.0;
    if (type != "default" && all != 0.0) {
      const double m = yarn_mscale(rope.value("factor", 1.0), all);
      scale *= m * m;
    }
  }
  c.attn_scale = static_cast<float>(scale);
}

void load_deepseek(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w, bool v3) {
  c.arch = v3 ? "deepseek3" : "deepseek2";
  read_decoder_sizes(cfg, c);
  const std::string act = cfg.get_string("hidden_act", "silu");
  if (act != "silu") cfg.fail(Errc::unsupported, "hidden_act '" + act + "' is not supported; supported: silu");
  read_mla(cfg, c);
  // V2's rotation is on adjacent pairs; V3 checkpoints say so with
  // rope_interleave (rotate-half otherwise).
  c.rope_layout = !v3 || cfg.get_bool("rope_interleave", true) ? kernels::RopeLayout::normal
                                                                : kernels::RopeLayout::neox;
  const std::string scoring = cfg.get_string("scoring_func", v3 ? "sigmoid" : "softmax");
  if (scoring != (v3 ? "sigmoid" : "softmax")) {
    cfg.fail(Errc::unsupported, "scoring_func '" + scoring + "' is not supported for this class");
  }
  read_deepseek_moe_config(cfg, c, v3 ? ModelConfig::ExpertRouter::deepseek_sigmoid
                                      : ModelConfig::ExpertRouter::deepseek_softmax);
  const std::string method = cfg.get_string("topk_method", v3 ? "noaux_tc" : "greedy");
  if (method == "greedy") {
    c.n_expert_groups = c.n_expert_groups_used = 1;
  } else if (method != (v3 ? "noaux_tc" : "group_limited_greedy")) {
    cfg.fail(Errc::unsupported, "topk_method '" + method + "' is not supported for this class");
  }
  if (cfg.get_int("moe_layer_freq", 1) != 1) cfg.fail(Errc::unsupported, "moe_layer_freq other than 1 is not supported");
  // Which layers are dense: mlp_layer_types ("dense" / "sparse", GLM-4.7-
  // Flash), else the first first_k_dense_replace.
  std::vector<uint8_t> moe(static_cast<size_t>(std::max<int64_t>(c.n_layer, 0)), 1);
  if (cfg.has("mlp_layer_types") && !cfg.json()["mlp_layer_types"].is_null()) {
    const Json& types = cfg.json()["mlp_layer_types"];
    if (!types.is_array() || static_cast<int64_t>(types.size()) != c.n_layer) {
      cfg.fail(Errc::bad_format, "mlp_layer_types must list num_hidden_layers entries");
    }
    for (size_t i = 0; i < types.size(); ++i) {
      const std::string t = types[i].is_string() ? types[i].get<std::string>() : "";
      if (t != "dense" && t != "sparse") cfg.fail(Errc::bad_format, "mlp_layer_types holds '" + t + "'; dense or sparse");
      moe[i] = t == "sparse";
    }
  } else {
    const int64_t n_dense = cfg.get_int("first_k_dense_replace", 0);
    if (n_dense < 0 || n_dense > c.n_layer) cfg.fail(Errc::bad_format, "first_k_dense_replace is out of range");
    std::fill(moe.begin(), moe.begin() + n_dense, 0);
  }
  const bool any_dense = std::find(moe.begin(), moe.end(), 0) != moe.end();
  c.n_ff_dense = any_dense ? cfg.get_int("intermediate_size") : 0;
  check_config(cfg, c);

  bind_model_ends(src, c, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    const std::string a = p + "self_attn.";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = src.vector(p + "input_layernorm.weight", c.n_embd);
    l.ffn_norm = src.vector(p + "post_attention_layernorm.weight", c.n_embd);
    if (c.mla_q_rank > 0) {
      l.wq_a = src.matrix(a + "q_a_proj.weight", c.n_embd, c.mla_q_rank);
      l.q_a_norm = src.vector(a + "q_a_layernorm.weight", c.mla_q_rank);
      l.wq = src.matrix(a + "q_b_proj.weight", c.mla_q_rank, c.q_dim());
    } else {
      l.wq = src.matrix(a + "q_proj.weight", c.n_embd, c.q_dim());
    }
    l.wkv_a = src.matrix(a + "kv_a_proj_with_mqa.weight", c.n_embd, c.mla_kv_rank + c.mla_rope_dim);
    l.kv_a_norm = src.vector(a + "kv_a_layernorm.weight", c.mla_kv_rank);
    l.wkv_b = src.matrix(a + "kv_b_proj.weight", c.mla_kv_rank, c.n_head * (c.mla_nope_dim + c.mla_v_dim));
    l.wo = src.matrix(a + "o_proj.weight", c.n_head * c.mla_v_dim, c.n_embd);
  }
  bind_deepseek_ffn(src, c,
                    {.is_moe = [&](int64_t il) { return moe[static_cast<size_t>(il)] != 0; },
                     .score_bias = v3 ? "gate.e_score_correction_bias" : ""},
                    w);
}

void deepseek_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::mla_attention_block(ctx, il, kv, x);
  layers::dense_or_moe_block(ctx, il, x);  // dense first layers, then experts and the shared ones
}

}  // namespace

const Architecture arch::deepseek2{.name = "deepseek2",
                                   .hf_class = "DeepseekV2ForCausalLM",
                                   .load_hf = [](const HfConfig& cfg, HfWeights& src, ModelConfig& c,
                                                 ModelWeights& w) { load_deepseek(cfg, src, c, w, false); },
                                   .embed = layers::embed_tokens,
                                   .layer = deepseek_layer,
                                   .output_norm = arch::rms_output_norm};

const Architecture arch::deepseek3{.name = "deepseek3",
                                   .hf_class = "DeepseekV3ForCausalLM",
                                   .hf_class_also = "Glm4MoeLiteForCausalLM",
                                   .load_hf = [](const HfConfig& cfg, HfWeights& src, ModelConfig& c,
                                                 ModelWeights& w) { load_deepseek(cfg, src, c, w, true); },
                                   .embed = layers::embed_tokens,
                                   .layer = deepseek_layer,
                                   .output_norm = arch::rms_output_norm};

}  // namespace troupe
