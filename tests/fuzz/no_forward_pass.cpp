// The fuzz targets load models (Model::load) and check sampling settings
// (check_sampling) but never run a step or sample, so they link without the
// forward pass (model/layers.cpp and the kernels, which would double the
// fuzz build). The architecture tables and the sampler still name these
// functions; the definitions here satisfy the linker and trap if reached.
#include "kernels/cpu_kernels.hpp"
#include "model/layers.hpp"

namespace troupe::kernels {

void softmax(float*, int64_t) { __builtin_trap(); }

}  // namespace troupe::kernels

namespace troupe::layers {

void norm(const StepContext&, Norm, float*, const float*, const float*, const float*, int64_t) {
  __builtin_trap();
}
void attention_block(const StepContext&, int64_t, const PagedKvView&, float*, Norm, bool) { __builtin_trap(); }
void swiglu_block(const StepContext&, int64_t, float*) { __builtin_trap(); }
void gelu_block(const StepContext&, int64_t, float*) { __builtin_trap(); }
void xielu_block(const StepContext&, int64_t, float*) { __builtin_trap(); }
void moe_block(const StepContext&, int64_t, float*) { __builtin_trap(); }
void sandwich_attention_block(const StepContext&, int64_t, const PagedKvView&, float*) { __builtin_trap(); }
void sandwich_geglu_block(const StepContext&, int64_t, float*) { __builtin_trap(); }
void post_norm_attention_block(const StepContext&, int64_t, const PagedKvView&, float*) { __builtin_trap(); }
void post_norm_swiglu_block(const StepContext&, int64_t, float*) { __builtin_trap(); }
void sandwich_swiglu_block(const StepContext&, int64_t, float*) { __builtin_trap(); }
void parallel_block(const StepContext&, int64_t, const PagedKvView&, float*) { __builtin_trap(); }
void dense_or_moe_block(const StepContext&, int64_t, float*) { __builtin_trap(); }
void mla_attention_block(const StepContext&, int64_t, const PagedKvView&, float*) { __builtin_trap(); }
void short_conv_block(const StepContext&, int64_t, const PagedKvView&, float*) { __builtin_trap(); }
void gated_delta_block(const StepContext&, int64_t, const PagedKvView&, float*) { __builtin_trap(); }
void mamba2_block(const StepContext&, int64_t, const PagedKvView&, float*) { __builtin_trap(); }
void embed_tokens(const StepContext&, float*) { __builtin_trap(); }
void embed_encoder_tokens(const StepContext&, float*) { __builtin_trap(); }
void post_layer_norm_attention_block(const StepContext&, int64_t, const PagedKvView&, float*) { __builtin_trap(); }
void post_layer_norm_gelu_block(const StepContext&, int64_t, float*) { __builtin_trap(); }
void post_layer_norm_swiglu_block(const StepContext&, int64_t, float*) { __builtin_trap(); }
void pre_norm_glu_encoder_block(const StepContext&, int64_t, const PagedKvView&, float*) { __builtin_trap(); }
void output_rms_norm(const StepContext&, float*, int64_t) { __builtin_trap(); }
void output_layer_norm(const StepContext&, float*, int64_t) { __builtin_trap(); }
void no_output_norm(const StepContext&, float*, int64_t) { __builtin_trap(); }

}  // namespace troupe::layers
