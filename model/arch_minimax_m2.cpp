// MiniMax-M2 (MiniMaxM2ForCausalLM, and GGUF "minimax-m2" files: MiniMax-M2,
// M2.1): GQA with RMSNorms over each token's whole q and k projections
// before a partial RoPE (rotary_dim of head_dim, rotated in halves), and in
// every layer Mixtral's experts (block_sparse_moe.experts.E.w1/w3/w2) chosen
// by sigmoid scores plus a correction bias (e_score_correction_bias), the
// chosen scores renormalized: DeepSeek-V3's router without groups.
// The published checkpoints are FP8 in blocks of 128x128 (model/hf_8bit.hpp).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void load_minimax_m2(const HfConfig& file_cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "minimax-m2";
  // Released configs give the rotated width as rotary_dim.
  nlohmann::json j = file_cfg.json();
  if (j.contains("rotary_dim") && j["rotary_dim"].is_number() && !j.contains("partial_rotary_factor") &&
      j.contains("head_dim") && j["head_dim"].is_number() && j["head_dim"].get<double>() > 0) {
    j["partial_rotary_factor"] = j["rotary_dim"].get<double>() / j["head_dim"].get<double>();
  }
  const HfConfig cfg(j, file_cfg.path());
  read_llama_config(cfg, c);
  c.n_expert = cfg.get_int("num_local_experts");
  c.n_expert_used = cfg.get_int("num_experts_per_tok");
  if (c.n_expert <= 0 || c.n_expert > (int64_t{1} << 16) || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
    cfg.fail(Errc::bad_format, "num_experts_per_tok must be in 1..num_local_experts");
  }
  c.expert_router = ModelConfig::ExpertRouter::deepseek_sigmoid;
  c.expert_weights_norm = true;
  c.qk_norm_whole = true;
  check_config(cfg, c);
  bind_llama_weights(src, c, {.dense_ffn = false}, w);
  bind_experts(src, c, {.block = "block_sparse_moe.", .gate = "w1", .up = "w3", .down = "w2"}, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.q_norm = src.vector(p + "self_attn.q_norm.weight", c.q_dim());
    l.k_norm = src.vector(p + "self_attn.k_norm.weight", c.kv_dim());
    // Host memory: the routing reads it there.
    l.expert_score_bias = src.vector(p + "block_sparse_moe.e_score_correction_bias", c.n_expert);
  }
}

void minimax_m2_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // whole-projection q/k norms
  layers::moe_block(ctx, il, x);
}

}  // namespace

const Architecture arch::minimax_m2{.name = "minimax-m2",
                                    .hf_class = "MiniMaxM2ForCausalLM",
                                    .load_hf = load_minimax_m2,
                                    .embed = layers::embed_tokens,
                                    .layer = minimax_m2_layer,
                                    .output_norm = arch::rms_output_norm};

}  // namespace troupe
