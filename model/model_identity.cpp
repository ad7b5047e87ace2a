// model_identity: FNV-1a over the config and the tensor table. Reading the
// head and tail bytes of each tensor touches two pages per tensor of the
// mapped file, not the weights.
#include "model/model_identity.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/dtype.hpp"
#include "model/model_stage.hpp"

namespace troupe {
namespace {

struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
  void text(const std::string& s) {
    bytes(s.data(), s.size());
    bytes("\0", 1);
  }
  template <class T>
  void value(T v) {
    bytes(&v, sizeof v);
  }
};

}  // namespace

std::string model_identity(const Model& model) {
  const ModelConfig& c = model.config();
  Fnv f;
  f.text(c.arch);
  for (const int64_t v : {c.n_vocab, c.n_embd, c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_ctx_train,
                          c.n_rot, c.n_expert, c.n_expert_used}) {
    f.value(v);
  }
  f.value(c.norm_eps);
  f.value(c.rope_theta);
  f.value(c.rope_freq_scale);
  // The factors in use: a worker that chose LongRoPE's other list must not join.
  for (const float v : c.rope_freq_factors) f.value(v);
  f.value(c.rope_mscale);
  f.value(static_cast<int>(c.rope_layout));
  f.value(c.sliding_window);
  f.value(c.tied_output);
  f.value(c.expert_weights_norm);
  f.value(c.expert_swiglu_limit);
  f.value(c.expert_swiglu_alpha);
  f.value(static_cast<int>(c.expert_router));
  f.value(c.expert_weights_scale);
  f.value(c.n_expert_groups);
  f.value(c.n_expert_groups_used);
  f.value(c.n_ff_dense);
  for (const int64_t v : {c.mla_q_rank, c.mla_kv_rank, c.mla_nope_dim, c.mla_rope_dim, c.mla_v_dim}) f.value(v);
  f.value(c.qk_norm_whole);
  for (const uint8_t l : c.local_layers) f.value(l);
  f.value(c.local_layers_share_rope);
  for (const uint8_t l : c.nope_layers) f.value(l);
  f.value(c.rope_local_theta);
  f.value(c.attn_scale);
  f.value(c.embed_scale);
  f.value(c.residual_scale);
  f.value(c.logit_scale);
  f.value(model.vocab().tokens.size());
  visit_stage_matrices(model, 0, c.n_layer, [&](const std::string& name, const Weight& w) {
    if (w.data == nullptr) return;
    f.text(name);
    f.value(static_cast<uint32_t>(w.type));
    f.value(w.n_in);
    f.value(w.n_out);
    const auto n = static_cast<size_t>(w.n_out * row_bytes(w.type, w.n_in));
    const size_t k = std::min<size_t>(n, 64);
    f.bytes(w.data, k);
    f.bytes(static_cast<const unsigned char*>(w.data) + n - k, k);
    // A LoRA update is part of the model a stage runs: its shape, and the
    // ends of A and of this matrix's part of B's first and last columns
    // (the scale is in B).
    for (const LoraDelta* d = w.lora; d != nullptr; d = d->next) {
      f.value(d->rank);
      f.value(w.lora_row0);
      const auto na = static_cast<size_t>(d->rank * w.n_in), nb = static_cast<size_t>(w.n_out);
      const float* first = d->bt + w.lora_row0;
      const float* last = first + (d->rank - 1) * d->rows;
      for (const auto& [p, len] : {std::pair{d->a, na}, std::pair{first, nb}, std::pair{last, nb}}) {
        const size_t m = std::min<size_t>(len, 16);
        f.bytes(p, m * sizeof(float));
        f.bytes(p + len - m, m * sizeof(float));
      }
    }
  });
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(f.h));
  return out;
}

std::string model_display_name(const Model& model) {
  if (model.path().empty()) return model.config().name;
  std::filesystem::path p(model.path());
  if (!p.has_filename()) p = p.parent_path();  // "dir/"
  return std::filesystem::is_directory(p) ? p.filename().string() : p.stem().string();
}

}  // namespace troupe
