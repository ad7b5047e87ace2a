// A model stage: a contiguous range of layers of one model on one backend,
// with the KV pages of those layers and a step arena. One stage is a whole
// model; a chain of stages is pipeline parallelism (the executor actors).
// The layers themselves come from the model's architecture (model/arch_*.cpp).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/backend.hpp"
#include "memory/kv_type.hpp"
#include "memory/step_arena.hpp"
#include "model/architecture.hpp"
#include "model/batch.hpp"
#include "model/layers.hpp"
#include "model/model.hpp"

namespace troupe {

struct StageOptions {
  int64_t first_layer = 0;
  int64_t last_layer = -1;      // exclusive; -1: the model's last layer
  int64_t max_tokens = 512;     // most tokens in one step (sizes the arena)
  int64_t max_seqs = 64;        // most sequences in one step
  int64_t n_kv_blocks = 256;    // KV pages per layer
  int64_t kv_block_size = 16;   // tokens per page
  KvType kv_type = KvType::f32; // element type of the KV pages (memory/kv_type.hpp)
  // Recurrent-state slots (models with recurrent layers): the most sequences
  // in flight at once, each holding one from its first step to its last.
  // 0: max_seqs.
  int64_t n_state_slots = 0;
  // Apply the final norm and the output head after last_layer even when it
  // is not the model's last: the early exit of self-speculative decoding
  // (the first L layers as a draft model).
  bool early_exit = false;
  // The last stage returns final-normed hidden rows [n_rows, n_embd] where
  // it would return logits: an embedding model's rows, pooled by the
  // sampler (model/pooling.hpp). The output head is then not read at all,
  // so a checkpoint saved without one runs. A classifier (ModelConfig::
  // n_labels) returns its head's scores of each row [n_rows, n_labels].
  bool embedding_output = false;
};

// Bytes one cached token takes in a stage of layers [first, last): K and V
// rows of every kv head (a conv layer's one K row), in `type`.
int64_t stage_kv_token_bytes(const ModelConfig& c, int64_t first, int64_t last, KvType type);
// Bytes of one sequence's recurrent state in layers [first, last) (f32; 0
// without recurrent layers).
int64_t stage_state_bytes(const ModelConfig& c, int64_t first, int64_t last);
// The state slots a stage with these options holds (0 without recurrent layers).
int64_t stage_state_slots(const ModelConfig& c, const StageOptions& o);
// Empty when `backend` ("cpu", "cuda") runs every layer of [first, last)
// with a KV cache of `type`; otherwise the one-sentence reason (a q8_0 cache
// for LFM2's short-convolution rows on CUDA needs n_embd a multiple of 32).
// Asked by the stage planner and by ModelStage.
std::string stage_layers_refusal(std::string_view backend, const ModelConfig& c, int64_t first, int64_t last,
                                 KvType type);

// Calls f(name, weight) for every weight matrix a stage with layers
// [first, last) holds: the embeddings on the first stage, the output head on
// the last (a tied head only once), and each layer's projections.
void visit_stage_matrices(const Model& model, int64_t first, int64_t last,
                          const std::function<void(const std::string& name, const Weight& w)>& f);

// Bytes a stage allocates on its backend, known before it exists (the
// start-up memory check of a device stage, the stage planner).
struct StageFootprint {
  size_t weight_bytes = 0;  // copies on a device, as stored in the file; 0 on the CPU (mapped in place)
  size_t kv_bytes = 0;      // K and V pages of the stage's layers, and their recurrent-state slots
  size_t arena_bytes = 0;   // the step arena
};

class ModelStage {
 public:
  // Throws Error(unsupported) when the backend cannot run one of the
  // stage's weight types (naming the tensor), Error(invalid_argument) for a
  // bad layer range or limits.
  ModelStage(std::shared_ptr<const Model> model, Backend& backend, StageOptions options);

  // What a stage with these options allocates; `device_copy`: weights are
  // uploaded (a device backend) rather than used in place.
  static StageFootprint footprint(const Model& model, const StageOptions& options, bool device_copy);
  ~ModelStage();
  ModelStage(const ModelStage&) = delete;
  ModelStage& operator=(const ModelStage&) = delete;

  bool is_first() const { return first_ == 0; }
  bool is_last() const { return last_ == model_->config().n_layer; }
  // Produces logits: the model's last stage, or an early exit.
  bool has_head() const { return is_last() || options_.early_exit; }
  int64_t first_layer() const { return first_; }
  int64_t last_layer() const { return last_; }
  const Model& model() const { return *model_; }
  const StageOptions& options() const { return options_; }
  // Width of this stage's output row: n_vocab with a head (n_embd for an
  // embedding model's, n_labels for a classifier's), else n_embd.
  int64_t output_width() const;

  // Runs the stage's layers on one batch.
  // in:  first stage: batch.tokens; other stages: hidden_in [n_tokens, n_embd] (host).
  // out: with a head: logits [n_logit_rows, n_vocab] (embedding_output:
  // normed hidden rows [n_logit_rows, n_embd], or a classifier's scores
  // [n_logit_rows, n_labels]); else hidden [n_tokens, n_embd] (host).
  // Throws Error(invalid_argument) for a batch past the stage's limits.
  void forward(const BatchView& batch, const float* hidden_in, float* out);

  // Copies KV block `src` to block `dst` in every layer of this stage (K and
  // V, through host memory): a fork's copy-on-write, or a benchmark giving
  // several sequences the same prefilled context in separate memory.
  void copy_kv_block(int32_t src, int32_t dst);

  size_t kv_bytes() const { return kv_bytes_; }
  int64_t state_slots() const { return state_slots_; }
  // KV bytes per cached token in this stage (its layers only).
  int64_t kv_token_bytes() const;
  size_t arena_capacity() const { return arena_.capacity(); }
  size_t arena_peak() const { return arena_.peak(); }

 private:
  void check_batch(const BatchView& batch) const;
  // seqs_scratch_, pos_scratch_, key_end_scratch_ and (a first stage's
  // pairs) types_scratch_ of the batch, for its StepContext.
  void step_views(const BatchView& batch);
  // Each sequence's InputEmbeds over its rows of x [n_tokens, n_embd].
  void put_input_embeds(const BatchView& batch, float* x);
  // scores [n, n_labels] = cls_out(tanh(cls_dense rows + b)) + b of the
  // classifier's rows [n, n_embd]; dense [n, n_embd] is scratch.
  void classifier_head(const float* rows, float* dense, float* scores, int64_t n);
  void check_weight_types() const;
  void upload_layer(int64_t il);

  std::shared_ptr<const Model> model_;
  Backend& backend_;
  const Architecture* arch_ = nullptr;
  StageOptions options_;
  int64_t first_ = 0;
  int64_t last_ = 0;
  ModelWeights weights_;  // backend copies of this stage's weights
  std::vector<PagedKvView> kv_;  // [last - first]
  size_t kv_bytes_ = 0;
  int64_t state_slots_ = 0;
  std::vector<void*> owned_;  // backend allocations freed on destruction
  StepArena arena_;
  std::vector<AttnSeq> seqs_scratch_;
  std::vector<int32_t> pos_scratch_;
  std::vector<int32_t> rows_scratch_;
  std::vector<int32_t> types_scratch_;  // [n_tokens] token types of a step with pairs
  std::vector<int32_t> key_end_scratch_;  // [n_tokens] AttnSeq::key_end of sequences with open spans
  layers::HostScratch host_scratch_;
};

}  // namespace troupe
