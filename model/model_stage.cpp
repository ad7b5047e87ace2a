// ModelStage: uploads its layers' weights, owns their KV pages and the step
// arena, and runs a step: embedding (first stage), the architecture's layers,
// then the final norm and output head on the rows that want logits (last
// stage). What a layer computes is the architecture's (model/arch_*.cpp).
#include "model/model_stage.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "kernels/kv_support.hpp"
#include "model/weight_upload.hpp"

namespace troupe {

void visit_stage_matrices(const Model& model, int64_t first, int64_t last,
                          const std::function<void(const std::string& name, const Weight& w)>& f) {
  const ModelWeights& w = model.weights();
  const bool is_first = first == 0;
  const bool is_last = last == model.config().n_layer;
  if (is_first) {
    f("token_embd", w.tok_embd);
    f("position_embd", w.pos_embd);
  }
  // A tied head is the embedding table itself: on the first stage too, it is one upload.
  if (is_last && !(is_first && w.output.data == w.tok_embd.data)) f("output", w.output);
  if (is_last) {
    f("cls", w.cls_dense);
    f("cls.output", w.cls_out);
  }
  for (int64_t il = first; il < last; ++il) {
    const LayerWeights& l = w.layers[static_cast<size_t>(il)];
    const std::string p = "blk." + std::to_string(il) + ".";
    f(p + "attn_q", l.wq);
    f(p + "attn_q_a", l.wq_a);
    f(p + "attn_kv_a_mqa", l.wkv_a);
    f(p + "attn_kv_b", l.wkv_b);
    f(p + "attn_k", l.wk);
    f(p + "attn_v", l.wv);
    f(p + "attn_output", l.wo);
    f(p + "shortconv.in_proj", l.conv_in);
    f(p + "attn_q_gate", l.wq_gate);
    f(p + "ssm_in", l.ssm_in);
    f(p + "attn_qkv", l.gdn_qkv);
    f(p + "attn_gate", l.gdn_z);
    f(p + "ssm_beta", l.gdn_b);
    f(p + "ssm_alpha", l.gdn_a);
    f(p + "ffn_gate", l.w_gate);
    f(p + "ffn_up", l.w_up);
    f(p + "ffn_down", l.w_down);
    f(p + "ffn_gate_inp", l.ffn_router);
    for (size_t e = 0; e < l.experts.size(); ++e) {
      const std::string x = p + "expert" + std::to_string(e) + ".";
      f(x + "ffn_gate", l.experts[e].w_gate);
      f(x + "ffn_up", l.experts[e].w_up);
      f(x + "ffn_down", l.experts[e].w_down);
    }
    f(p + "ffn_gate_shexp", l.shared.w_gate);
    f(p + "ffn_up_shexp", l.shared.w_up);
    f(p + "ffn_down_shexp", l.shared.w_down);
    f(p + "ffn_gate_inp_shexp", l.shared_gate);
  }
}

namespace {

int64_t arena_floats(const ModelConfig& c, const StageOptions& o) {
  const int64_t T = o.max_tokens;
  // The output rows: final hidden rows, then logits (or a classifier's
  // dense rows and its labels).
  const int64_t out_width = std::max(c.n_vocab, c.n_embd + c.n_labels);
  return T * c.n_embd + layers::block_scratch_floats(c, T) + o.max_seqs * (c.n_embd + out_width);
}

}  // namespace

int64_t stage_kv_token_bytes(const ModelConfig& c, int64_t first, int64_t last, KvType type) {
  int64_t bytes = 0;
  for (int64_t il = first; il < last; ++il) {
    const ModelConfig::KvLayerShape s = c.kv_layer_shape(il);
    bytes += (s.has_v ? 2 : 1) * s.n_rows * kv_row_bytes(type, s.row_dim);
  }
  return bytes;
}

int64_t stage_state_bytes(const ModelConfig& c, int64_t first, int64_t last) {
  int64_t bytes = 0;
  for (int64_t il = first; il < last; ++il) {
    if (c.is_recurrent(il)) bytes += c.recurrent_state_floats() * static_cast<int64_t>(sizeof(float));
  }
  return bytes;
}

int64_t stage_state_slots(const ModelConfig& c, const StageOptions& o) {
  const int64_t last = o.last_layer < 0 ? c.n_layer : o.last_layer;
  if (stage_state_bytes(c, o.first_layer, last) == 0) return 0;
  return o.n_state_slots > 0 ? o.n_state_slots : o.max_seqs;
}

std::string stage_layers_refusal(std::string_view backend, const ModelConfig& c, int64_t first, int64_t last,
                                 KvType type) {
  // The CUDA attention's windows look back only.
  if (backend == "cuda" && !c.causal && c.sliding_window > 0) {
    return "the cuda backend cannot run an encoder's local attention (" + c.arch +
           "'s windows reach both ways); run it on the CPU";
  }
  if (backend != "cuda" || type != KvType::q8_0 || c.n_embd % kKvQ8Group == 0) return {};
  for (int64_t il = first; il < last; ++il) {
    if (c.is_conv(il)) {
      return "the cuda backend cannot hold a q8_0 KV cache for the short-convolution rows of layer " +
             std::to_string(il) + " (n_embd " + std::to_string(c.n_embd) +
             " is not a multiple of 32; use --kv-type f16 or bf16)";
    }
  }
  return {};
}

int64_t ModelStage::kv_token_bytes() const {
  return stage_kv_token_bytes(model_->config(), first_, last_, options_.kv_type);
}

StageFootprint ModelStage::footprint(const Model& model, const StageOptions& options, bool device_copy) {
  const ModelConfig& c = model.config();
  const int64_t first = options.first_layer;
  const int64_t last = options.last_layer < 0 ? c.n_layer : options.last_layer;
  StageFootprint fp;
  if (device_copy) {
    visit_stage_matrices(model, first, last, [&](const std::string&, const Weight& w) {
      if (w.data == nullptr) return;
      // Uploaded as stored in the file (open_backend keeps f32 as f32).
      fp.weight_bytes += static_cast<size_t>(w.n_out * row_bytes(w.type, w.n_in));
    });
    // Norm weights and biases: a few f32 vectors of n_embd or less per layer.
    fp.weight_bytes += static_cast<size_t>((last - first + 1) * 16 * c.n_embd) * sizeof(float);
  }
  fp.kv_bytes = static_cast<size_t>(options.n_kv_blocks * options.kv_block_size *
                                        stage_kv_token_bytes(c, first, last, options.kv_type) +
                                    stage_state_slots(c, options) * stage_state_bytes(c, first, last));
  fp.arena_bytes = static_cast<size_t>(arena_floats(c, options)) * sizeof(float) + 32 * 64;
  return fp;
}

void ModelStage::check_weight_types() const {
  visit_stage_matrices(*model_, first_, last_, [&](const std::string& name, const Weight& w) {
    if (w.data != nullptr && !backend_.supports(w.type)) {
      throw Error(Errc::unsupported, "the " + std::string(backend_.name()) + " backend cannot run weights of type " +
                                         std::string(dtype_name(w.type)) + " (tensor " + name + ")");
    }
  });
}

ModelStage::ModelStage(std::shared_ptr<const Model> model, Backend& backend, StageOptions options)
    : model_(std::move(model)), backend_(backend), options_(options) {
  const ModelConfig& c = model_->config();
  arch_ = &architecture(c.arch);
  first_ = options_.first_layer;
  last_ = options_.last_layer < 0 ? c.n_layer : options_.last_layer;
  if (first_ < 0 || first_ >= last_ || last_ > c.n_layer) {
    throw Error(Errc::invalid_argument, "stage layers [" + std::to_string(first_) + ", " + std::to_string(last_) +
                                            ") are not a non-empty range inside the model's " +
                                            std::to_string(c.n_layer) + " layers");
  }
  if (options_.max_tokens <= 0 || options_.max_seqs <= 0 || options_.n_kv_blocks <= 0 ||
      options_.kv_block_size <= 0 || options_.n_state_slots < 0) {
    throw Error(Errc::invalid_argument, "stage limits (max_tokens, max_seqs, KV blocks, block size) must be positive, "
                                        "and state slots not negative");
  }

  check_weight_types();
  if (const std::string why = kv_type_refusal(backend_.name(), options_.kv_type, c.head_dim); !why.empty()) {
    throw Error(Errc::unsupported, why);
  }
  if (const std::string why = stage_layers_refusal(backend_.name(), c, first_, last_, options_.kv_type);
      !why.empty()) {
    throw Error(Errc::unsupported, why);
  }

  // Weights: this stage's layers only, plus the embeddings (first stage) and
  // the output head (last stage).
  const ModelWeights& host = model_->weights();
  if (is_first()) {
    weights_.tok_embd = upload_table(backend_, host.tok_embd, owned_);
    weights_.pos_embd = upload_table(backend_, host.pos_embd, owned_);
    weights_.type_embd = upload_vector(backend_, host.type_embd, c.n_token_types * c.n_embd, owned_);
    weights_.embd_norm = upload_vector(backend_, host.embd_norm, c.n_embd, owned_);
    weights_.embd_norm_b = upload_vector(backend_, host.embd_norm_b, c.n_embd, owned_);
  }
  if (has_head()) {
    weights_.output_norm = upload_vector(backend_, host.output_norm, c.n_embd, owned_);
    weights_.output_norm_b = upload_vector(backend_, host.output_norm_b, c.n_embd, owned_);
    if (options_.embedding_output && c.n_labels > 0) {
      if (host.cls_dense.data != nullptr) weights_.cls_dense = upload_matrix(backend_, host.cls_dense, owned_);
      weights_.cls_dense_b = upload_vector(backend_, host.cls_dense_b, c.n_embd, owned_);
      weights_.cls_norm = upload_vector(backend_, host.cls_norm, c.n_embd, owned_);
      weights_.cls_norm_b = upload_vector(backend_, host.cls_norm_b, c.n_embd, owned_);
      weights_.cls_out = upload_matrix(backend_, host.cls_out, owned_);
      weights_.cls_out_b = upload_vector(backend_, host.cls_out_b, c.n_labels, owned_);
    }
    if (!options_.embedding_output) {
      if (host.output.data == nullptr && c.n_labels > 0) {
        throw Error(Errc::unsupported, c.name + " is a sequence classifier (" + std::to_string(c.n_labels) + " label" +
                                           (c.n_labels == 1 ? "" : "s") +
                                           "): its head scores, and it generates no text; run it for scores "
                                           "(--embedding: /v1/rerank, /v1/score, /v1/classify)");
      }
      if (host.output.data == nullptr) {
        throw Error(Errc::unsupported, c.name +
                                           " has no output head (lm_head.weight): it is an embedding model; "
                                           "run it for embeddings (--embedding)");
      }
      weights_.output = upload_matrix(backend_, host.output, owned_);
    }
  }
  weights_.layers.resize(static_cast<size_t>(c.n_layer));
  for (int64_t il = first_; il < last_; ++il) upload_layer(il);

  // KV pages: one pool per layer, allocated once, in the configured type. A
  // conv layer's pages hold one row of conv input per token, and no V; a
  // recurrent layer has no pages but a state per slot (f32).
  state_slots_ = stage_state_slots(c, options_);
  for (int64_t il = first_; il < last_; ++il) {
    const ModelConfig::KvLayerShape s = c.kv_layer_shape(il);
    PagedKvView v{.n_blocks = options_.n_kv_blocks,
                  .block_size = options_.kv_block_size,
                  .n_head_kv = s.n_rows,
                  .head_dim = s.row_dim,
                  .type = options_.kv_type};
    if (c.is_recurrent(il)) {
      v.n_state_slots = state_slots_;
      v.state_floats = c.recurrent_state_floats();
      const auto state_bytes = static_cast<size_t>(v.n_state_slots * v.state_floats) * sizeof(float);
      v.state = static_cast<float*>(backend_.allocate(state_bytes));
      owned_.push_back(v.state);
      kv_.push_back(v);
      kv_bytes_ += state_bytes;
      continue;
    }
    const size_t layer_bytes = static_cast<size_t>(v.n_blocks * v.block_bytes());
    v.k = backend_.allocate(layer_bytes);
    owned_.push_back(v.k);
    if (s.has_v) {
      v.v = backend_.allocate(layer_bytes);
      owned_.push_back(v.v);
    }
    kv_.push_back(v);
    kv_bytes_ += (s.has_v ? 2 : 1) * layer_bytes;
  }

  // Step arena, sized for the largest step: the residual stream, one block's
  // temporaries at a time, and the last rows and logits of every sequence.
  const int64_t T = options_.max_tokens;
  const size_t arena_bytes = static_cast<size_t>(arena_floats(c, options_)) * sizeof(float) + 32 * 64;  // + alignment slack
  void* arena_mem = backend_.allocate(arena_bytes);
  owned_.push_back(arena_mem);
  arena_ = StepArena(arena_mem, arena_bytes);
  seqs_scratch_.reserve(static_cast<size_t>(options_.max_seqs));
  pos_scratch_.reserve(static_cast<size_t>(T));
  rows_scratch_.reserve(static_cast<size_t>(T));
}

void ModelStage::upload_layer(int64_t il) {
  const ModelConfig& c = model_->config();
  const LayerWeights& h = model_->weights().layers[static_cast<size_t>(il)];
  LayerWeights& d = weights_.layers[static_cast<size_t>(il)];
  d.attn_norm = upload_vector(backend_, h.attn_norm, c.n_embd, owned_);
  d.attn_norm_b = upload_vector(backend_, h.attn_norm_b, c.n_embd, owned_);
  d.wq = upload_matrix(backend_, h.wq, owned_);
  d.wq_a = upload_matrix(backend_, h.wq_a, owned_);
  d.q_a_norm = upload_vector(backend_, h.q_a_norm, c.mla_q_rank, owned_);
  d.wkv_a = upload_matrix(backend_, h.wkv_a, owned_);
  d.kv_a_norm = upload_vector(backend_, h.kv_a_norm, c.mla_kv_rank, owned_);
  d.wkv_b = upload_matrix(backend_, h.wkv_b, owned_);
  d.wk = upload_matrix(backend_, h.wk, owned_);
  d.wv = upload_matrix(backend_, h.wv, owned_);
  d.wo = upload_matrix(backend_, h.wo, owned_);
  d.conv_in = upload_matrix(backend_, h.conv_in, owned_);
  d.conv_in_b = upload_vector(backend_, h.conv_in_b, 3 * c.n_embd, owned_);
  d.conv_w = upload_vector(backend_, h.conv_w, c.n_embd * c.conv_kernel, owned_);
  d.conv_b = upload_vector(backend_, h.conv_b, c.n_embd, owned_);
  d.wq_gate = upload_matrix(backend_, h.wq_gate, owned_);
  d.gdn_qkv = upload_matrix(backend_, h.gdn_qkv, owned_);
  d.gdn_z = upload_matrix(backend_, h.gdn_z, owned_);
  d.gdn_b = upload_matrix(backend_, h.gdn_b, owned_);
  d.gdn_a = upload_matrix(backend_, h.gdn_a, owned_);
  d.gdn_conv = upload_vector(backend_, h.gdn_conv, c.gdn_conv_dim() * c.conv_kernel, owned_);
  d.gdn_decay = upload_vector(backend_, h.gdn_decay, c.gdn_v_heads, owned_);
  d.gdn_dt_bias = upload_vector(backend_, h.gdn_dt_bias, c.gdn_v_heads, owned_);
  d.gdn_norm = upload_vector(backend_, h.gdn_norm, c.gdn_v_dim, owned_);
  const kernels::Mamba2Shape ssm = c.mamba2_shape();
  d.ssm_in = upload_matrix(backend_, h.ssm_in, owned_);
  d.ssm_conv = upload_vector(backend_, h.ssm_conv, ssm.conv_dim() * ssm.taps, owned_);
  d.ssm_conv_b = upload_vector(backend_, h.ssm_conv_b, ssm.conv_dim(), owned_);
  d.ssm_a = upload_vector(backend_, h.ssm_a, ssm.n_heads, owned_);
  d.ssm_dt_bias = upload_vector(backend_, h.ssm_dt_bias, ssm.n_heads, owned_);
  d.ssm_d = upload_vector(backend_, h.ssm_d, ssm.n_heads, owned_);
  d.ssm_norm = upload_vector(backend_, h.ssm_norm, ssm.inner(), owned_);
  d.bq = upload_vector(backend_, h.bq, c.q_dim(), owned_);
  d.bk = upload_vector(backend_, h.bk, c.kv_dim(), owned_);
  d.bv = upload_vector(backend_, h.bv, c.kv_dim(), owned_);
  d.bo = upload_vector(backend_, h.bo, c.n_embd, owned_);
  d.q_norm = upload_vector(backend_, h.q_norm, c.qk_norm_whole ? c.q_dim() : c.head_dim, owned_);
  d.k_norm = upload_vector(backend_, h.k_norm, c.qk_norm_whole ? c.kv_dim() : c.head_dim, owned_);
  d.attn_sinks = upload_vector(backend_, h.attn_sinks, c.n_head, owned_);
  d.attn_post_norm = upload_vector(backend_, h.attn_post_norm, c.n_embd, owned_);
  d.ffn_post_norm = upload_vector(backend_, h.ffn_post_norm, c.n_embd, owned_);
  d.ffn_norm = upload_vector(backend_, h.ffn_norm, c.n_embd, owned_);
  d.ffn_norm_b = upload_vector(backend_, h.ffn_norm_b, c.n_embd, owned_);
  d.w_gate = upload_matrix(backend_, h.w_gate, owned_);
  d.w_up = upload_matrix(backend_, h.w_up, owned_);
  d.w_down = upload_matrix(backend_, h.w_down, owned_);
  d.b_up = upload_vector(backend_, h.b_up, h.w_up.n_out, owned_);
  d.b_down = upload_vector(backend_, h.b_down, c.n_embd, owned_);
  d.ffn_router = upload_matrix(backend_, h.ffn_router, owned_);
  d.ffn_router_b = upload_vector(backend_, h.ffn_router_b, c.n_expert, owned_);
  d.expert_score_bias = h.expert_score_bias;  // the routing reads it on the host
  d.xielu = h.xielu;                          // scalars, passed with each call
  d.experts.resize(h.experts.size());
  for (size_t e = 0; e < h.experts.size(); ++e) {
    d.experts[e].w_gate = upload_matrix(backend_, h.experts[e].w_gate, owned_);
    d.experts[e].w_up = upload_matrix(backend_, h.experts[e].w_up, owned_);
    d.experts[e].w_down = upload_matrix(backend_, h.experts[e].w_down, owned_);
    d.experts[e].b_gate = upload_vector(backend_, h.experts[e].b_gate, c.n_ff, owned_);
    d.experts[e].b_up = upload_vector(backend_, h.experts[e].b_up, c.n_ff, owned_);
    d.experts[e].b_down = upload_vector(backend_, h.experts[e].b_down, c.n_embd, owned_);
  }
  d.shared.w_gate = upload_matrix(backend_, h.shared.w_gate, owned_);
  d.shared.w_up = upload_matrix(backend_, h.shared.w_up, owned_);
  d.shared.w_down = upload_matrix(backend_, h.shared.w_down, owned_);
  d.shared_gate = upload_matrix(backend_, h.shared_gate, owned_);
}

ModelStage::~ModelStage() {
  for (void* p : owned_) backend_.deallocate(p);
}

void ModelStage::copy_kv_block(int32_t src, int32_t dst) {
  if (src < 0 || dst < 0 || src >= options_.n_kv_blocks || dst >= options_.n_kv_blocks) {
    throw Error(Errc::invalid_argument, "copy_kv_block: block " + std::to_string(src < 0 || src >= options_.n_kv_blocks ? src : dst) +
                                            " outside the pool of " + std::to_string(options_.n_kv_blocks));
  }
  if (kv_.empty() || src == dst) return;
  for (const PagedKvView& v : kv_) {
    const auto bytes = static_cast<size_t>(v.block_bytes());
    std::vector<unsigned char> tmp(bytes);
    for (void* base : {v.k, v.v}) {
      if (base == nullptr) continue;  // a conv layer's pages have no V
      auto* p = static_cast<unsigned char*>(base);
      backend_.copy_to_host(tmp.data(), p + static_cast<size_t>(src) * bytes, bytes);
      backend_.synchronize();
      backend_.copy_from_host(p + static_cast<size_t>(dst) * bytes, tmp.data(), bytes);
    }
  }
  backend_.synchronize();
}

int64_t ModelStage::output_width() const {
  const ModelConfig& c = model_->config();
  if (!has_head()) return c.n_embd;
  if (!options_.embedding_output) return c.n_vocab;
  return c.n_labels > 0 ? c.n_labels : c.n_embd;
}

void ModelStage::classifier_head(const float* rows, float* dense, float* scores, int64_t n) {
  const ModelConfig& c = model_->config();
  const float* in = rows;
  if (weights_.cls_dense.data != nullptr) {
    backend_.matmul(dense, rows, weights_.cls_dense, n);
    if (weights_.cls_dense_b != nullptr) backend_.add_bias(dense, weights_.cls_dense_b, n, c.n_embd);
    switch (c.cls_act) {
      case ModelConfig::ClassifierAct::tanh:
        backend_.soft_cap(dense, 1.0f, n * c.n_embd);
        break;
      case ModelConfig::ClassifierAct::gelu_norm:
        backend_.gelu_erf(dense, dense, n * c.n_embd);
        backend_.layernorm(dense, dense, weights_.cls_norm, weights_.cls_norm_b, n, c.n_embd, c.norm_eps);
        break;
      case ModelConfig::ClassifierAct::relu:
        backend_.relu(dense, dense, n * c.n_embd);
        break;
    }
    in = dense;
  }
  backend_.matmul(scores, in, weights_.cls_out, n);
  // A decoder's head (model/sequence_classifier.hpp) has no bias.
  if (weights_.cls_out_b != nullptr) backend_.add_bias(scores, weights_.cls_out_b, n, c.n_labels);
}

void ModelStage::forward(const BatchView& batch, const float* hidden_in, float* out) {
  check_batch(batch);
  const ModelConfig& c = model_->config();
  const int64_t n_tokens = batch.n_tokens();
  arena_.reset();

  step_views(batch);
  const bool typed = !types_scratch_.empty();
  const layers::StepContext ctx{.backend = backend_,
                                .arena = arena_,
                                .config = c,
                                .weights = weights_,
                                .host = host_scratch_,
                                .n_tokens = n_tokens,
                                .tokens = is_first() ? batch.tokens.data() : nullptr,
                                .token_types = typed ? types_scratch_.data() : nullptr,
                                .pos = pos_scratch_.data(),
                                .seqs = seqs_scratch_.data(),
                                .n_seqs = static_cast<int>(seqs_scratch_.size())};

  float* x = arena_.floats(n_tokens * c.n_embd);  // [n_tokens, n_embd] residual stream
  if (is_first()) {
    arch_->embed(ctx, x);
    put_input_embeds(batch, x);
  } else {
    backend_.copy_from_host(x, hidden_in, static_cast<size_t>(n_tokens * c.n_embd) * sizeof(float));
  }
  for (int64_t il = first_; il < last_; ++il) arch_->layer(ctx, il, kv_[static_cast<size_t>(il - first_)], x);

  if (!has_head()) {
    backend_.copy_to_host(out, x, static_cast<size_t>(n_tokens * c.n_embd) * sizeof(float));
    backend_.synchronize();
    return;
  }

  // Logits only for the rows that want them (the last n_logits tokens of
  // each sequence), at most max_seqs rows at a time: the arena holds that
  // many, while a scored prompt chunk may ask for hundreds.
  rows_scratch_.clear();
  const bool pool_mean = options_.embedding_output && c.n_labels > 0 && c.cls_pool_mean;
  int32_t row = 0;
  for (const BatchSeq& s : batch.seqs) {
    if (pool_mean && s.n_logits > 0) {
      // Every row of the prompt, final-normed, averaged into its first; the
      // head then reads that row for each row asked of it.
      if (s.n_past != 0 || s.n_logits != s.n_tokens) {
        throw Error(Errc::invalid_argument,
                    "a mean-pooled classifier's head needs every row of its prompt in one step (n_past 0, n_logits "
                    "= n_tokens)");
      }
      float* first = x + static_cast<int64_t>(row) * c.n_embd;
      arch_->output_norm(ctx, first, s.n_tokens);
      for (int32_t j = 1; j < s.n_tokens; ++j) backend_.add(first, first + int64_t{j} * c.n_embd, c.n_embd);
      backend_.scale(first, 1.0f / static_cast<float>(s.n_tokens), c.n_embd);
      rows_scratch_.insert(rows_scratch_.end(), static_cast<size_t>(s.n_tokens), row);
      row += s.n_tokens;
      continue;
    }
    row += s.n_tokens;
    for (int32_t j = s.n_logits; j > 0; --j) rows_scratch_.push_back(row - j);
  }
  const auto n_rows = static_cast<int64_t>(rows_scratch_.size());
  if (n_rows == 0) return;
  const int64_t group = std::min(n_rows, options_.max_seqs);
  // An embedding stage's rows are the normed hidden states themselves, a
  // classifier's the scores of its head.
  const int64_t width = output_width();
  const bool classify = options_.embedding_output && c.n_labels > 0;
  float* last = arena_.floats(group * c.n_embd);  // [group, n_embd]
  float* dense = classify ? arena_.floats(group * c.n_embd) : nullptr;                           // [group, n_embd]
  float* logits = options_.embedding_output && !classify ? last : arena_.floats(group * width);  // [group, width]
  for (int64_t r0 = 0; r0 < n_rows; r0 += group) {
    const int64_t n = std::min(group, n_rows - r0);
    backend_.gather_rows(last, x, rows_scratch_.data() + r0, n, c.n_embd);
    if (!pool_mean) arch_->output_norm(ctx, last, n);  // the mean's rows were normed before it
    if (classify) {
      classifier_head(last, dense, logits, n);
    } else if (!options_.embedding_output) {
      backend_.matmul(logits, last, weights_.output, n);
      if (c.final_softcap > 0.0f) backend_.soft_cap(logits, c.final_softcap, n * width);  // Gemma 2
    }
    backend_.copy_to_host(out + r0 * width, logits, static_cast<size_t>(n * width) * sizeof(float));
    backend_.synchronize();
  }
}

}  // namespace troupe
