// The vision tower's forward, as transformers' CLIPVisionModel /
// SiglipVisionModel and LlavaModel / Gemma3Model.get_image_features compute it:
//   patches [n_patches, 3 p p] --conv kernels (+ bias)--> [n_patches, hidden]
//   x = [class row | patches] + position rows; CLIP: x = LayerNorm(x)
//   the first n_run layers: x += attn(LN1(x)); x += fc2(act(fc1(LN2(x))))
//   LLaVA: rows (without the class row under "default") --linear_1, act,
//     linear_2--> features [image_tokens, text_embd]
//   Gemma 3: x = post_layernorm(x) [grid, grid, hidden] --average of each
//     pool x pool square--> [image_tokens, hidden] --RMSNorm (1 + w), matmul-->
//     features [image_tokens, text_embd]
#include "vision/vision_encoder.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "model/weight_upload.hpp"

namespace troupe::vision {
namespace {

constexpr int64_t kKvBlock = 16;

void activate(Backend& be, Activation act, float* x, int64_t n) {
  switch (act) {
    case Activation::quick_gelu:
      be.quick_gelu(x, x, n);
      return;
    case Activation::gelu_tanh:
      be.gelu(x, x, n);
      return;
    case Activation::gelu_erf:
      be.gelu_erf(x, x, n);
      return;
  }
}

}  // namespace

KvType VisionEncoder::default_kv_type(const VisionModel& model) {
  // In the checkpoint's precision: a bf16 or f16 tower's keys and values are
  // computed as transformers computes them in that dtype, and on AMX its
  // attention takes the bf16 tiles (kernels::attention); an f32 tower's stay
  // f32. (f32 ones for an f16 tower, on a CPU without AMX, were within the
  // machine's spread of f16 ones: bench_vision, docs/performance.md.)
  const std::vector<LayerWeights>& layers = model.weights().tower.layers;
  const DType wtype = layers.empty() ? DType::f32 : layers.front().wq.type;
  return wtype == DType::bf16 ? KvType::bf16 : wtype == DType::f16 ? KvType::f16 : KvType::f32;
}

VisionEncoder::VisionEncoder(std::shared_ptr<const VisionModel> model, Backend& backend, std::optional<KvType> kv_type)
    : model_(std::move(model)), backend_(backend) {
  const VisionConfig& v = model_->config();
  const VisionWeights& host = model_->weights();
  const int64_t h = v.hidden;
  const int64_t kp = 3 * v.patch_size * v.patch_size;
  weights_.patch_b = upload_vector(backend_, host.patch_b, h, owned_);
  weights_.class_embd = host.class_embd;  // host: copied into x's first row
  weights_.pos_embd = upload_vector(backend_, host.pos_embd, v.n_positions() * h, owned_);
  weights_.pre_norm = upload_vector(backend_, host.pre_norm, h, owned_);
  weights_.pre_norm_b = upload_vector(backend_, host.pre_norm_b, h, owned_);
  weights_.post_norm = upload_vector(backend_, host.post_norm, h, owned_);
  weights_.post_norm_b = upload_vector(backend_, host.post_norm_b, h, owned_);
  weights_.tower.layers.resize(host.tower.layers.size());
  for (size_t il = 0; il < host.tower.layers.size(); ++il) {
    const LayerWeights& s = host.tower.layers[il];
    LayerWeights& d = weights_.tower.layers[il];
    d.attn_norm = upload_vector(backend_, s.attn_norm, h, owned_);
    d.attn_norm_b = upload_vector(backend_, s.attn_norm_b, h, owned_);
    d.wq = upload_matrix(backend_, s.wq, owned_);
    d.wk = upload_matrix(backend_, s.wk, owned_);
    d.wv = upload_matrix(backend_, s.wv, owned_);
    d.wo = upload_matrix(backend_, s.wo, owned_);
    d.bq = upload_vector(backend_, s.bq, h, owned_);
    d.bk = upload_vector(backend_, s.bk, h, owned_);
    d.bv = upload_vector(backend_, s.bv, h, owned_);
    d.bo = upload_vector(backend_, s.bo, h, owned_);
    d.ffn_norm = upload_vector(backend_, s.ffn_norm, h, owned_);
    d.ffn_norm_b = upload_vector(backend_, s.ffn_norm_b, h, owned_);
    d.w_up = upload_matrix(backend_, s.w_up, owned_);
    d.b_up = upload_vector(backend_, s.b_up, v.n_ff, owned_);
    d.w_down = upload_matrix(backend_, s.w_down, owned_);
    d.b_down = upload_vector(backend_, s.b_down, h, owned_);
  }
  patch_matrix_ = upload_matrix(backend_, {.data = host.patch, .type = DType::f32, .n_in = kp, .n_out = h}, owned_);
  if (v.projector == VisionConfig::Projector::gemma3) {
    weights_.soft_norm = upload_vector(backend_, host.soft_norm, h, owned_);
    weights_.soft_proj = upload_matrix(backend_, host.soft_proj, owned_);
  } else {
    weights_.proj1 = upload_matrix(backend_, host.proj1, owned_);
    weights_.proj1_b = upload_vector(backend_, host.proj1_b, v.projector_hidden, owned_);
    weights_.proj2 = upload_matrix(backend_, host.proj2, owned_);
    weights_.proj2_b = upload_vector(backend_, host.proj2_b, v.text_embd, owned_);
  }

  // One image's keys and values, in pages the shared attention reads.
  const int64_t n = v.n_positions();
  const int64_t head_dim = h / v.n_head;
  kv_ = PagedKvView{.n_blocks = (n + kKvBlock - 1) / kKvBlock,
                    .block_size = kKvBlock,
                    .n_head_kv = v.n_head,
                    .head_dim = head_dim,
                    .type = kv_type.value_or(default_kv_type(*model_))};
  const auto kv_bytes = static_cast<size_t>(kv_.n_blocks * kv_.block_bytes());
  kv_.k = backend_.allocate(kv_bytes);
  owned_.push_back(kv_.k);
  kv_.v = backend_.allocate(kv_bytes);
  owned_.push_back(kv_.v);
  for (int32_t b = 0; b < kv_.n_blocks; ++b) block_table_.push_back(b);
  for (int32_t i = 0; i < n; ++i) pos_.push_back(i);

  // x, then the largest of: the patches, a layer block, the projector.
  const int64_t n_out = v.image_tokens();
  const int64_t projector = v.projector == VisionConfig::Projector::gemma3 ? n_out * (v.hidden + v.text_embd)
                                                                           : n_out * (v.projector_hidden + v.text_embd);
  const int64_t scratch =
      std::max({v.n_patches() * kp, layers::block_scratch_floats(model_->tower_config(), n), projector});
  const auto arena_bytes = static_cast<size_t>(n * h + scratch) * sizeof(float) + 64 * 64;
  void* base = backend_.allocate(arena_bytes);
  owned_.push_back(base);
  arena_ = StepArena(base, arena_bytes);
  patches_.resize(static_cast<size_t>(v.n_patches() * kp));
}

VisionEncoder::~VisionEncoder() {
  for (void* p : owned_) backend_.deallocate(p);
}

void VisionEncoder::embed(const float* pixels, float* x) {
  const VisionConfig& v = model_->config();
  const int64_t h = v.hidden;
  const int64_t p = v.patch_size;
  const int64_t side = v.image_size;
  const int64_t grid = side / p;
  const int64_t kp = 3 * p * p;
  // Patches in row-major grid order (the conv output flattened), each as
  // (channel, y, x), the order of a kernel's weights.
  for (int64_t py = 0; py < grid; ++py) {
    for (int64_t px = 0; px < grid; ++px) {
      float* row = patches_.data() + (py * grid + px) * kp;
      for (int64_t c = 0; c < 3; ++c) {
        for (int64_t ky = 0; ky < p; ++ky) {
          const float* src = pixels + c * side * side + (py * p + ky) * side + px * p;
          std::copy(src, src + p, row + (c * p + ky) * p);
        }
      }
    }
  }
  const size_t mark = arena_.used();
  float* in = arena_.floats(v.n_patches() * kp);  // [n_patches, 3 p p]
  backend_.copy_from_host(in, patches_.data(), patches_.size() * sizeof(float));
  float* rows = x + (v.class_token ? h : 0);  // [n_patches, hidden]
  backend_.matmul(rows, in, patch_matrix_, v.n_patches());
  if (weights_.patch_b != nullptr) backend_.add_bias(rows, weights_.patch_b, v.n_patches(), h);
  if (v.class_token) backend_.copy_from_host(x, weights_.class_embd, static_cast<size_t>(h) * sizeof(float));
  backend_.add(x, weights_.pos_embd, v.n_positions() * h);
  if (weights_.pre_norm != nullptr) {
    backend_.layernorm(x, x, weights_.pre_norm, weights_.pre_norm_b, v.n_positions(), h, v.norm_eps);
  }
  arena_.rewind(mark);
}

void VisionEncoder::project(const float* rows, float* out) {
  const VisionConfig& v = model_->config();
  const int64_t n = v.image_tokens();
  const size_t mark = arena_.used();
  float* mid = arena_.floats(n * v.projector_hidden);  // [image_tokens, projector_hidden]
  float* feats = arena_.floats(n * v.text_embd);       // [image_tokens, text_embd]
  backend_.matmul(mid, rows, weights_.proj1, n);
  if (weights_.proj1_b != nullptr) backend_.add_bias(mid, weights_.proj1_b, n, v.projector_hidden);
  activate(backend_, v.projector_act, mid, n * v.projector_hidden);
  backend_.matmul(feats, mid, weights_.proj2, n);
  if (weights_.proj2_b != nullptr) backend_.add_bias(feats, weights_.proj2_b, n, v.text_embd);
  backend_.copy_to_host(out, feats, static_cast<size_t>(n * v.text_embd) * sizeof(float));
  backend_.synchronize();
  arena_.rewind(mark);
}

void VisionEncoder::pool_project(const float* x, float* out) {
  const VisionConfig& v = model_->config();
  const int64_t h = v.hidden;
  const int64_t grid = v.grid();
  const int64_t side = grid / v.pool;  // pooled rows a side
  const int64_t n = v.image_tokens();
  // AvgPool2d over the [hidden, grid, grid] map: each output row the mean of
  // a pool x pool square of patch rows, summed in the square's row order.
  pooled_.assign(static_cast<size_t>(n * h), 0.0f);
  rows_.resize(static_cast<size_t>(v.n_patches() * h));
  backend_.copy_to_host(rows_.data(), x, rows_.size() * sizeof(float));
  backend_.synchronize();
  const float inv = 1.0f / static_cast<float>(v.pool * v.pool);
  for (int64_t oy = 0; oy < side; ++oy) {
    for (int64_t ox = 0; ox < side; ++ox) {
      float* dst = pooled_.data() + (oy * side + ox) * h;
      for (int64_t ky = 0; ky < v.pool; ++ky) {
        for (int64_t kx = 0; kx < v.pool; ++kx) {
          const float* src = rows_.data() + ((oy * v.pool + ky) * grid + ox * v.pool + kx) * h;
          for (int64_t c = 0; c < h; ++c) dst[c] += src[c];
        }
      }
      for (int64_t c = 0; c < h; ++c) dst[c] *= inv;
    }
  }
  const size_t mark = arena_.used();
  float* mid = arena_.floats(n * h);              // [image_tokens, hidden]
  float* feats = arena_.floats(n * v.text_embd);  // [image_tokens, text_embd]
  backend_.copy_from_host(mid, pooled_.data(), pooled_.size() * sizeof(float));
  backend_.rmsnorm(mid, mid, weights_.soft_norm, n, h, v.norm_eps);
  backend_.matmul(feats, mid, weights_.soft_proj, n);
  backend_.copy_to_host(out, feats, static_cast<size_t>(n * v.text_embd) * sizeof(float));
  backend_.synchronize();
  arena_.rewind(mark);
}

void VisionEncoder::encode(std::span<const float> pixels, float* out) {
  const VisionConfig& v = model_->config();
  const auto want = static_cast<size_t>(3 * v.image_size * v.image_size);
  if (pixels.size() != want) {
    throw Error(Errc::invalid_argument, "the vision tower takes 3x" + std::to_string(v.image_size) + "x" +
                                            std::to_string(v.image_size) + " pixels, got " +
                                            std::to_string(pixels.size()) + " values");
  }
  arena_.reset();
  const int64_t n = v.n_positions();
  float* x = arena_.floats(n * v.hidden);  // [n_positions, hidden] residual stream
  embed(pixels.data(), x);
  const AttnSeq seq{.q_begin = 0, .n_q = static_cast<int32_t>(n), .n_past = 0, .block_table = block_table_.data()};
  const layers::StepContext ctx{.backend = backend_,
                                .arena = arena_,
                                .config = model_->tower_config(),
                                .weights = weights_.tower,
                                .host = host_,
                                .n_tokens = n,
                                .pos = pos_.data(),
                                .seqs = &seq,
                                .n_seqs = 1};
  for (int64_t il = 0; il < v.n_run; ++il) {
    layers::attention_block(ctx, il, kv_, x, layers::Norm::layer, /*rope=*/false);
    layers::gelu_block(ctx, il, x);
  }
  if (weights_.post_norm != nullptr) {
    backend_.layernorm(x, x, weights_.post_norm, weights_.post_norm_b, n, v.hidden, v.norm_eps);
  }
  if (v.projector == VisionConfig::Projector::gemma3) {
    pool_project(x, out);
  } else {
    project(x + (v.drop_first ? v.hidden : 0), out);
  }
}

std::vector<float> VisionEncoder::encode_image(std::span<const uint8_t> bytes) {
  const Image image = decode_image(bytes);
  const std::vector<float> pixels = preprocess(image, model_->processor());
  const VisionConfig& v = model_->config();
  std::vector<float> out(static_cast<size_t>(int64_t{v.image_tokens()} * v.text_embd));
  encode(pixels, out.data());
  return out;
}

}  // namespace troupe::vision
