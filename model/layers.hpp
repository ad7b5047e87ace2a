// Layer helpers the architectures are built from: norms, self-attention over
// the paged KV cache, dense (SwiGLU, GELU) and mixture-of-experts FFNs, and
// the residual blocks made of them. They call only the Backend, and take
// every temporary from the step arena (released at the end of each block).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.hpp"
#include "memory/step_arena.hpp"
#include "model/model.hpp"

namespace troupe::layers {

// Host-side buffers of a step (mixture-of-experts routing reads the router
// logits on the host). Sized on the first steps, then reused.
struct HostScratch {
  std::vector<float> router;     // [n_tokens, n_expert] router logits
  std::vector<float> combined;   // [n_tokens, n_embd] weighted sum of expert outputs
  std::vector<float> expert_out; // [rows of one expert, n_embd]
  std::vector<int32_t> choice;   // [n_tokens, n_expert_used] chosen experts
  std::vector<float> gate;       // [n_tokens, n_expert_used] their weights
  std::vector<int32_t> rows;     // token rows routed to one expert
  std::vector<float> row_gate;   // and the weight of that expert for each
};

// What the layers of one step see. Pointers into weights and activations
// are backend memory; tokens, positions and sequences are host.
struct StepContext {
  Backend& backend;
  StepArena& arena;
  const ModelConfig& config;
  const ModelWeights& weights;  // this stage's weights, in backend memory
  HostScratch& host;
  int64_t n_tokens = 0;
  const int32_t* tokens = nullptr;  // [n_tokens] (first stage)
  const int32_t* token_types = nullptr;  // [n_tokens] an encoder's segment of each token (host); null: all 0
  const int32_t* pos = nullptr;     // [n_tokens]
  const AttnSeq* seqs = nullptr;
  int n_seqs = 0;
};

enum class Norm { rms, layer };

// Floats of arena one block needs at most for n_tokens tokens (whichever
// block of whichever architecture is largest), for sizing the arena.
int64_t block_scratch_floats(const ModelConfig& c, int64_t n_tokens);

// y [n_rows, n_embd] = norm(x) with weight (and bias for LayerNorm).
void norm(const StepContext& ctx, Norm kind, float* y, const float* x, const float* weight, const float* bias,
          int64_t n_rows);

// out [n_tokens, n_embd] = o_proj(attention(q, k, v)) of layer il for the
// normed input xb [n_tokens, n_embd]: projections with optional biases,
// optional per-head q/k RMSNorm (before RoPE, as Qwen3 does), RoPE unless
// `rope` is false (the layer's own base where it is local), the new keys and
// values written to kv, causal attention within the layer's window.
void self_attention(const StepContext& ctx, int64_t il, const PagedKvView& kv, const float* xb, float* out,
                    bool rope);

// The gate's activation of a gated FFN: SwiGLU (Llama) or GeGLU with the
// tanh GELU (Gemma).
enum class Gate { silu, gelu };

// out [n_rows, n_embd] = down(act(gate(xb)) * up(xb)), xb [n_rows, n_embd].
void gated_ffn(const StepContext& ctx, const Weight& gate, const Weight& up, const Weight& down, const float* xb,
               float* out, int64_t n_rows, Gate act);
inline void swiglu_ffn(const StepContext& ctx, const Weight& gate, const Weight& up, const Weight& down,
                       const float* xb, float* out, int64_t n_rows) {
  gated_ffn(ctx, gate, up, down, xb, out, n_rows, Gate::silu);
}

// out [n_tokens, n_embd] = down(gelu(up(xb) + b_up)) + b_down (GPT-2's MLP;
// the erf GELU where ModelConfig::gelu_erf, BERT's).
void gelu_ffn(const StepContext& ctx, const LayerWeights& w, const float* xb, float* out);

// out [n_rows, n_embd] = one expert on its rows xb [n_rows, n_embd]: a
// SwiGLU FFN, with gpt-oss's biases and clamped activation where the model
// has them (ModelConfig::expert_swiglu_limit).
void expert_ffn(const StepContext& ctx, const ExpertWeights& ex, const float* xb, float* out, int64_t n_rows);

// out [n_tokens, n_embd] = sum over the n_expert_used experts with the
// largest router logits of gate * expert(xb), gate the softmax of those
// logits (Mixtral's top-k routing) or, without expert_weights_norm, their
// shares of the softmax over all experts. Routing runs on the host (the router logits are copied
// back), each expert then runs on the rows routed to it.
void moe_ffn(const StepContext& ctx, const LayerWeights& w, const float* xb, float* out);

// The residual blocks: x [n_tokens, n_embd] += f(norm(x)).
void attention_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x, Norm kind, bool rope);
void swiglu_block(const StepContext& ctx, int64_t il, float* x);
void gelu_block(const StepContext& ctx, int64_t il, float* x);  // LayerNorm before the MLP
// Apertus's MLP: x += down(xielu(up(rmsnorm(x)))), no gate.
void xielu_block(const StepContext& ctx, int64_t il, float* x);
void moe_block(const StepContext& ctx, int64_t il, float* x);
// Gemma's sandwich: x += post_norm(f(pre_norm(x))), RMSNorms on both sides
// (attn_norm / attn_post_norm; ffn_norm / ffn_post_norm), GeGLU FFN.
void sandwich_attention_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x);
void sandwich_geglu_block(const StepContext& ctx, int64_t il, float* x);
// The same sandwich around a SwiGLU MLP (GLM-4).
void sandwich_swiglu_block(const StepContext& ctx, int64_t il, float* x);
// Command-R's parallel block: x += attn(n) + mlp(n), n = LayerNorm(x) with
// attn_norm (no bias); RoPE where ModelConfig::ropes(il).
void parallel_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x);
// The layer's FFN block as its weights say: the experts (moe_block) where
// the layer has them, else swiglu_block (the dense layers of GLM-4.5,
// DeepSeek and ERNIE 4.5 beside their MoE ones).
void dense_or_moe_block(const StepContext& ctx, int64_t il, float* x);
// DeepSeek's latent attention (layers_mla.cpp): out [n_tokens, n_embd] for
// the normed input xb, and the pre-norm block around it; the arena it needs
// beyond the other blocks' (0 without MLA).
void mla_attention(const StepContext& ctx, int64_t il, const PagedKvView& kv, const float* xb, float* out);
void mla_attention_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x);
int64_t mla_scratch_floats(const ModelConfig& c, int64_t n_tokens);
// LFM2's short-convolution block (layers_conv.cpp), x += out_proj(C *
// conv(B * x)) of the RMS-normed input, its conv input kept in kv's rows;
// the arena it needs (0 for a model without conv layers).
void short_conv_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x);
int64_t conv_scratch_floats(const ModelConfig& c, int64_t n_tokens);
// Qwen3-Next and Qwen3.5's Gated DeltaNet block (layers_gdn.cpp): x +=
// out_proj(norm(gdn(qkv)) * silu(z)) of the RMS-normed input, its state in
// kv's slots (Backend::gated_delta_net); the arena it needs (0 without).
void gated_delta_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x);
int64_t gdn_scratch_floats(const ModelConfig& c, int64_t n_tokens);
// Granite 4.0-H's Mamba-2 block (layers_mamba.cpp): x += out_proj(scan(...))
// of the RMS-normed input, its state in kv's slots (Backend::mamba2_scan);
// the arena it needs (0 without).
void mamba2_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x);
int64_t mamba_scratch_floats(const ModelConfig& c, int64_t n_tokens);
// OLMo 2's post-norm: x += post_norm(f(x)), no norm before the block
// (attn_post_norm; ffn_post_norm with a SwiGLU FFN).
void post_norm_attention_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x);
void post_norm_swiglu_block(const StepContext& ctx, int64_t il, float* x);
// BERT's post-LN blocks: x = LayerNorm(x + f(x)) with attn_norm(_b) after
// self-attention (causal or not as ModelConfig::causal says; RoPE when
// n_rot > 0), ffn_norm(_b) after the GELU MLP (gelu_ffn).
void post_layer_norm_attention_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x);
void post_layer_norm_gelu_block(const StepContext& ctx, int64_t il, float* x);
// NomicBERT's: the same after a SwiGLU MLP, w_down(silu(w_gate h) * w_up h).
void post_layer_norm_swiglu_block(const StepContext& ctx, int64_t il, float* x);
// ModernBERT's encoder block: x += attn(LayerNorm(x)) (x as it is where the
// layer has no attn_norm, as its first), then x += w_down(act(w_gate h) *
// w_up h), h = LayerNorm(x), act the exact GELU or SiLU (ModelConfig::glu_silu).
void pre_norm_glu_encoder_block(const StepContext& ctx, int64_t il, const PagedKvView& kv, float* x);

// The last stage's final RMSNorm (weights.output_norm) of the rows that get
// logits, x [n_rows, n_embd], in place, then divided by logit_scale
// (Granite; the output projection is linear, so the logits are divided).
void output_rms_norm(const StepContext& ctx, float* x, int64_t n_rows);
// The same with a LayerNorm without bias (Command-R).
void output_layer_norm(const StepContext& ctx, float* x, int64_t n_rows);
// No final norm (BERT's kind: the last block ends in its LayerNorm).
void no_output_norm(const StepContext& ctx, float* x, int64_t n_rows);

// First-stage input: x [n_tokens, n_embd] = token embeddings times
// embed_scale (plus learned position embeddings when the model has them).
void embed_tokens(const StepContext& ctx, float* x);
// An encoder's input (BERT): embed_tokens, plus each token's token-type row
// (ctx.token_types; type 0 without them) when the model has a type table,
// then the embeddings' LayerNorm.
void embed_encoder_tokens(const StepContext& ctx, float* x);

}  // namespace troupe::layers
