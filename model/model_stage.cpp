// ModelStage: the decoder forward pass over a layer range (Llama family:
// RMSNorm, GQA attention with RoPE over paged KV, SwiGLU FFN). Every
// intermediate has a name and a shape; all of them come from the step arena.
#include "model/model_stage.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"

namespace troupe {
namespace {

const float* upload_vector(Backend& backend, const float* host, int64_t n, std::vector<void*>& owned) {
  if (host == nullptr) return nullptr;
  const Weight w = backend.upload_weight({.data = host, .type = DType::f32, .n_in = n, .n_out = 1});
  if (w.data != host) owned.push_back(const_cast<void*>(w.data));
  return static_cast<const float*>(w.data);
}

Weight upload(Backend& backend, const Weight& host, std::vector<void*>& owned) {
  if (host.data == nullptr) return host;
  const Weight w = backend.upload_weight(host);
  if (w.data != host.data) owned.push_back(const_cast<void*>(w.data));
  return w;
}

}  // namespace

ModelStage::ModelStage(std::shared_ptr<const Model> model, Backend& backend, StageOptions options)
    : model_(std::move(model)), backend_(backend), options_(options) {
  const ModelConfig& c = model_->config();
  first_ = options_.first_layer;
  last_ = options_.last_layer < 0 ? c.n_layer : options_.last_layer;
  if (first_ < 0 || first_ >= last_ || last_ > c.n_layer) {
    throw Error(Errc::invalid_argument, "stage layers [" + std::to_string(first_) + ", " + std::to_string(last_) +
                                            ") are not a non-empty range inside the model's " +
                                            std::to_string(c.n_layer) + " layers");
  }
  if (options_.max_tokens <= 0 || options_.max_seqs <= 0 || options_.n_kv_blocks <= 0 ||
      options_.kv_block_size <= 0) {
    throw Error(Errc::invalid_argument, "stage limits (max_tokens, max_seqs, KV blocks, block size) must be positive");
  }

  // Weights: this stage's layers only, plus the embedding (first stage) and
  // the output head (last stage).
  const ModelWeights& host = model_->weights();
  if (is_first()) weights_.tok_embd = upload(backend_, host.tok_embd, owned_);
  if (is_last()) {
    weights_.output_norm = upload_vector(backend_, host.output_norm, c.n_embd, owned_);
    weights_.output = upload(backend_, host.output, owned_);
  }
  weights_.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t il = first_; il < last_; ++il) {
    const LayerWeights& h = host.layers[static_cast<size_t>(il)];
    LayerWeights& d = weights_.layers[static_cast<size_t>(il)];
    d.attn_norm = upload_vector(backend_, h.attn_norm, c.n_embd, owned_);
    d.attn_norm_b = upload_vector(backend_, h.attn_norm_b, c.n_embd, owned_);
    d.wq = upload(backend_, h.wq, owned_);
    d.wk = upload(backend_, h.wk, owned_);
    d.wv = upload(backend_, h.wv, owned_);
    d.wo = upload(backend_, h.wo, owned_);
    d.bq = upload_vector(backend_, h.bq, c.q_dim(), owned_);
    d.bk = upload_vector(backend_, h.bk, c.kv_dim(), owned_);
    d.bv = upload_vector(backend_, h.bv, c.kv_dim(), owned_);
    d.ffn_norm = upload_vector(backend_, h.ffn_norm, c.n_embd, owned_);
    d.w_gate = upload(backend_, h.w_gate, owned_);
    d.w_up = upload(backend_, h.w_up, owned_);
    d.w_down = upload(backend_, h.w_down, owned_);
  }

  // KV pages: one pool per layer, allocated once.
  PagedKvView shape{.n_blocks = options_.n_kv_blocks,
                    .block_size = options_.kv_block_size,
                    .n_head_kv = c.n_head_kv,
                    .head_dim = c.head_dim};
  const size_t layer_bytes = static_cast<size_t>(shape.n_blocks * shape.block_stride()) * sizeof(float);
  for (int64_t il = first_; il < last_; ++il) {
    PagedKvView v = shape;
    v.k = static_cast<float*>(backend_.allocate(layer_bytes));
    owned_.push_back(v.k);
    v.v = static_cast<float*>(backend_.allocate(layer_bytes));
    owned_.push_back(v.v);
    kv_.push_back(v);
    kv_bytes_ += 2 * layer_bytes;
  }

  // Step arena, sized for the largest step: the residual stream, the attention
  // and FFN intermediates, and the logits of every sequence.
  const int64_t T = options_.max_tokens;
  const int64_t attn_floats = T * (2 * c.n_embd + 2 * c.q_dim() + 2 * c.kv_dim());  // xb, q, k, v, att, proj
  const int64_t ffn_floats = T * (2 * c.n_embd + 2 * c.n_ff);                       // xb, gate, up, proj
  const int64_t floats = T * c.n_embd                                  // x, the residual stream
                         + std::max(attn_floats, ffn_floats)           // one block's temporaries at a time
                         + options_.max_seqs * (c.n_embd + c.n_vocab);  // last rows, logits
  const size_t arena_bytes = static_cast<size_t>(floats) * sizeof(float) + 16 * 64;  // + alignment slack
  void* arena_mem = backend_.allocate(arena_bytes);
  owned_.push_back(arena_mem);
  arena_ = StepArena(arena_mem, arena_bytes);
  seqs_scratch_.reserve(static_cast<size_t>(options_.max_seqs));
  pos_scratch_.reserve(static_cast<size_t>(T));
  rows_scratch_.reserve(static_cast<size_t>(options_.max_seqs));
}

ModelStage::~ModelStage() {
  for (void* p : owned_) backend_.deallocate(p);
}

int64_t ModelStage::output_width() const {
  return is_last() ? model_->config().n_vocab : model_->config().n_embd;
}

void ModelStage::check_batch(const BatchView& batch) const {
  const int64_t n_tokens = batch.n_tokens();
  if (batch.seqs.empty() || n_tokens == 0) throw Error(Errc::invalid_argument, "empty batch");
  if (n_tokens > options_.max_tokens) {
    throw Error(Errc::invalid_argument, "batch of " + std::to_string(n_tokens) + " tokens exceeds the stage limit of " +
                                            std::to_string(options_.max_tokens));
  }
  if (static_cast<int64_t>(batch.seqs.size()) > options_.max_seqs) {
    throw Error(Errc::invalid_argument, "batch of " + std::to_string(batch.seqs.size()) +
                                            " sequences exceeds the stage limit of " + std::to_string(options_.max_seqs));
  }
  if (is_first() && static_cast<int64_t>(batch.tokens.size()) != n_tokens) {
    throw Error(Errc::invalid_argument, "batch has " + std::to_string(batch.tokens.size()) + " token ids for " +
                                            std::to_string(n_tokens) + " tokens");
  }
  const int64_t n_vocab = model_->config().n_vocab;
  if (is_first()) {
    for (int32_t t : batch.tokens) {
      if (t < 0 || t >= n_vocab) {
        throw Error(Errc::invalid_argument, "token id " + std::to_string(t) + " outside the vocabulary of " +
                                                std::to_string(n_vocab));
      }
    }
  }
  for (const BatchSeq& s : batch.seqs) {
    if (s.n_tokens <= 0 || s.n_past < 0) throw Error(Errc::invalid_argument, "sequence with no new tokens");
    const int64_t need = (s.n_past + s.n_tokens + options_.kv_block_size - 1) / options_.kv_block_size;
    if (static_cast<int64_t>(s.block_table.size()) < need) {
      throw Error(Errc::invalid_argument, "block table of " + std::to_string(s.block_table.size()) +
                                              " blocks cannot hold " + std::to_string(s.n_past + s.n_tokens) +
                                              " tokens");
    }
    for (int64_t b = 0; b < need; ++b) {
      const int32_t id = s.block_table[static_cast<size_t>(b)];
      if (id < 0 || id >= options_.n_kv_blocks) {
        throw Error(Errc::invalid_argument, "KV block id " + std::to_string(id) + " outside the pool");
      }
    }
  }
}

void ModelStage::forward(const BatchView& batch, const float* hidden_in, float* out) {
  check_batch(batch);
  const ModelConfig& c = model_->config();
  const int64_t n_tokens = batch.n_tokens();
  arena_.reset();

  // Positions and the attention view of each sequence.
  seqs_scratch_.clear();
  pos_scratch_.clear();
  int32_t row = 0;
  for (const BatchSeq& s : batch.seqs) {
    seqs_scratch_.push_back({.q_begin = row, .n_q = s.n_tokens, .n_past = s.n_past, .block_table = s.block_table.data()});
    for (int32_t i = 0; i < s.n_tokens; ++i) pos_scratch_.push_back(s.n_past + i);
    row += s.n_tokens;
  }

  float* x = arena_.floats(n_tokens * c.n_embd);  // [n_tokens, n_embd] residual stream
  if (is_first()) {
    backend_.embedding(x, weights_.tok_embd, batch.tokens.data(), n_tokens);
  } else {
    backend_.copy_from_host(x, hidden_in, static_cast<size_t>(n_tokens * c.n_embd) * sizeof(float));
  }

  for (int64_t il = first_; il < last_; ++il) {
    attention_block(il, x, n_tokens, pos_scratch_.data(), seqs_scratch_);
    ffn_block(il, x, n_tokens);
  }

  if (!is_last()) {
    backend_.copy_to_host(out, x, static_cast<size_t>(n_tokens * c.n_embd) * sizeof(float));
    backend_.synchronize();
    return;
  }

  // Logits only for the rows that want them (the last token of a sequence).
  rows_scratch_.clear();
  row = 0;
  for (const BatchSeq& s : batch.seqs) {
    row += s.n_tokens;
    if (s.want_logits) rows_scratch_.push_back(row - 1);
  }
  const auto n_rows = static_cast<int64_t>(rows_scratch_.size());
  if (n_rows == 0) return;
  float* last = arena_.floats(n_rows * c.n_embd);  // [n_rows, n_embd]
  backend_.gather_rows(last, x, rows_scratch_.data(), n_rows, c.n_embd);
  backend_.rmsnorm(last, last, weights_.output_norm, n_rows, c.n_embd, c.norm_eps);
  float* logits = arena_.floats(n_rows * c.n_vocab);  // [n_rows, n_vocab]
  backend_.matmul(logits, last, weights_.output, n_rows);
  backend_.copy_to_host(out, logits, static_cast<size_t>(n_rows * c.n_vocab) * sizeof(float));
  backend_.synchronize();
}

void ModelStage::attention_block(int64_t il, float* x, int64_t n_tokens, const int32_t* pos,
                                 const std::vector<AttnSeq>& seqs) {
  const ModelConfig& c = model_->config();
  const LayerWeights& w = weights_.layers[static_cast<size_t>(il)];
  const size_t mark = arena_.used();  // the block's temporaries are released at its end
  float* xb = arena_.floats(n_tokens * c.n_embd);    // [n_tokens, n_embd] normed input
  float* q = arena_.floats(n_tokens * c.q_dim());    // [n_tokens, n_head, head_dim]
  float* k = arena_.floats(n_tokens * c.kv_dim());   // [n_tokens, n_head_kv, head_dim]
  float* v = arena_.floats(n_tokens * c.kv_dim());   // [n_tokens, n_head_kv, head_dim]
  float* att = arena_.floats(n_tokens * c.q_dim());  // [n_tokens, n_head, head_dim]
  float* proj = arena_.floats(n_tokens * c.n_embd);  // [n_tokens, n_embd]

  backend_.rmsnorm(xb, x, w.attn_norm, n_tokens, c.n_embd, c.norm_eps);
  backend_.matmul(q, xb, w.wq, n_tokens);
  backend_.matmul(k, xb, w.wk, n_tokens);
  backend_.matmul(v, xb, w.wv, n_tokens);
  if (w.bq != nullptr) backend_.add_bias(q, w.bq, n_tokens, c.q_dim());
  if (w.bk != nullptr) backend_.add_bias(k, w.bk, n_tokens, c.kv_dim());
  if (w.bv != nullptr) backend_.add_bias(v, w.bv, n_tokens, c.kv_dim());

  const kernels::RopeParams rope{.layout = c.rope_layout,
                                 .n_rot = c.n_rot,
                                 .theta = c.rope_theta,
                                 .freq_scale = c.rope_freq_scale,
                                 .freq_factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data()};
  backend_.rope(q, pos, n_tokens, c.n_head, c.head_dim, rope);
  backend_.rope(k, pos, n_tokens, c.n_head_kv, c.head_dim, rope);

  const PagedKvView& kv = kv_[static_cast<size_t>(il - first_)];
  backend_.kv_write(kv, k, v, seqs.data(), static_cast<int>(seqs.size()));
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  backend_.attention(att, q, kv, seqs.data(), static_cast<int>(seqs.size()), c.n_head, scale, c.sliding_window);

  backend_.matmul(proj, att, w.wo, n_tokens);
  backend_.add(x, proj, n_tokens * c.n_embd);
  arena_.rewind(mark);
}

void ModelStage::ffn_block(int64_t il, float* x, int64_t n_tokens) {
  const ModelConfig& c = model_->config();
  const LayerWeights& w = weights_.layers[static_cast<size_t>(il)];
  const size_t mark = arena_.used();
  float* xb = arena_.floats(n_tokens * c.n_embd);    // [n_tokens, n_embd]
  float* gate = arena_.floats(n_tokens * c.n_ff);    // [n_tokens, n_ff]
  float* up = arena_.floats(n_tokens * c.n_ff);      // [n_tokens, n_ff]
  float* proj = arena_.floats(n_tokens * c.n_embd);  // [n_tokens, n_embd]

  backend_.rmsnorm(xb, x, w.ffn_norm, n_tokens, c.n_embd, c.norm_eps);
  backend_.matmul(gate, xb, w.w_gate, n_tokens);
  backend_.matmul(up, xb, w.w_up, n_tokens);
  backend_.swiglu(gate, gate, up, n_tokens * c.n_ff);
  backend_.matmul(proj, gate, w.w_down, n_tokens);
  backend_.add(x, proj, n_tokens * c.n_embd);
  arena_.rewind(mark);
}

}  // namespace troupe
