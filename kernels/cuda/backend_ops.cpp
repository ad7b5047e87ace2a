// CudaBackend's op methods: check arguments on the host (the same checks,
// and messages, as the CPU kernels), stage host index arrays, record one op.
// Nothing here launches: see flush() in cuda_backend.cpp.
#include <cmath>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/backend_impl.hpp"
#include "kernels/cuda/launchers.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/kv_support.hpp"

namespace troupe {
namespace {

using cuda::Op;
using cuda::OpKind;

void check_len(const char* fn, int64_t n) {
  if (n < 0) throw Error(Errc::invalid_argument, std::string("cuda ") + fn + ": negative length " + std::to_string(n));
}

void check_rows(const char* fn, int64_t n_tokens, int64_t n_embd) {
  if (n_tokens < 0 || n_tokens > 0x7fffffff || n_embd <= 0) {
    throw Error(Errc::invalid_argument, std::string("cuda ") + fn + ": bad shape n_tokens=" +
                                            std::to_string(n_tokens) + " n_embd=" + std::to_string(n_embd));
  }
}

void check_view(const char* fn, const PagedKvView& kv) {
  if (kv.k == nullptr || kv.v == nullptr || kv.n_blocks <= 0 || kv.block_size <= 0 || kv.n_head_kv <= 0 ||
      kv.head_dim <= 0 || kv.head_dim > cuda::kAttnMaxHeadDim) {
    throw Error(Errc::invalid_argument,
                std::string("cuda ") + fn + ": bad paged KV view (n_blocks=" + std::to_string(kv.n_blocks) +
                    " block_size=" + std::to_string(kv.block_size) + " n_head_kv=" + std::to_string(kv.n_head_kv) +
                    " head_dim=" + std::to_string(kv.head_dim) + ", k/v set: " + (kv.k && kv.v ? "yes" : "no") +
                    "; head_dim at most " + std::to_string(cuda::kAttnMaxHeadDim) + ")");
  }
  if (const std::string why = kv_type_refusal("cuda", kv.type, kv.head_dim); !why.empty()) {
    throw Error(Errc::unsupported, std::string("cuda ") + fn + ": " + why);
  }
}

// The record fields shared by kv_write and attention.
Op attn_op(OpKind kind, const PagedKvView& kv, const cuda::AttnPlan& plan, const void* meta) {
  Op op(kind);
  op.attn.k_cache = kv.k;
  op.attn.v_cache = kv.v;
  op.attn.n_blocks = kv.n_blocks;
  op.attn.block_size = kv.block_size;
  op.attn.n_head_kv = kv.n_head_kv;
  op.attn.head_dim = kv.head_dim;
  op.attn.kv_type = static_cast<int64_t>(kv.type);
  op.attn.meta = meta;
  op.attn.tables_off = plan.tables_off;
  op.attn.dec_off = plan.dec_off;
  op.attn.tiles_off = plan.tiles_off;
  op.attn.key_end_off = plan.key_end_off;
  op.attn.n_seqs = plan.n_seqs;
  op.attn.n_dec = plan.n_dec;
  op.attn.n_tiles = plan.n_tiles;
  op.attn.max_q = plan.max_q;
  return op;
}

}  // namespace

void CudaBackend::matmul(float* y, const float* x, const Weight& w, int64_t n_tokens) {
  if (n_tokens < 0 || w.n_in <= 0 || w.n_out <= 0) {
    throw Error(Errc::invalid_argument, "cuda matmul: bad shape n_tokens=" + std::to_string(n_tokens) + " weight [" +
                                            std::to_string(w.n_out) + ", " + std::to_string(w.n_in) + "]");
  }
  if (n_tokens == 0) return;
  if (y == nullptr || x == nullptr || w.data == nullptr) {
    throw Error(Errc::invalid_argument, "cuda matmul: null input, output or weight");
  }
  row_bytes(w.type, w.n_in);  // throws unless rows are whole blocks
  if (cuda::matmul_min_workspace(w, n_tokens) > impl_->ctx.workspace_bytes() &&
      !cuda::gemv_supported(w.data, w.type, x, n_tokens, w.n_in)) {
    throw Error(Errc::out_of_memory, "cuda matmul: " + std::to_string(n_tokens) + " tokens x " +
                                         std::to_string(w.n_in) + " need more than the " +
                                         std::to_string(impl_->ctx.workspace_bytes()) +
                                         "-byte workspace (raise CudaBackendOptions.workspace_bytes)");
  }
  Op op(OpKind::matmul);
  op.matmul = {.y = y, .x = x, .w = w.data, .type = static_cast<int64_t>(w.type), .n_in = w.n_in,
               .n_out = w.n_out, .n_tokens = n_tokens};
  impl_->record(op);
}

void CudaBackend::embedding(float* y, const Weight& table, const int32_t* ids, int64_t n_tokens) {
  check_rows("embedding", n_tokens, table.n_in);
  if (n_tokens == 0) return;
  if (y == nullptr || table.data == nullptr || ids == nullptr) {
    throw Error(Errc::invalid_argument, "cuda embedding: null output, table or ids");
  }
  row_bytes(table.type, table.n_in);
  for (int64_t i = 0; i < n_tokens; ++i) {
    // A device kernel cannot throw, so ids are checked against the table
    // here (the CPU kernel checks only the sign).
    if (ids[i] < 0 || (table.n_out > 0 && ids[i] >= table.n_out)) {
      throw Error(Errc::invalid_argument, "cuda embedding: token id " + std::to_string(ids[i]) + " at position " +
                                              std::to_string(i) + " is outside the table of " +
                                              std::to_string(table.n_out) + " rows");
    }
  }
  const void* dev_ids = impl_->stage(cuda::StageTag::ids, ids, static_cast<size_t>(n_tokens) * sizeof(int32_t));
  Op op(OpKind::embedding);
  op.embedding = {.y = y, .table = table.data, .type = static_cast<int64_t>(table.type),
                  .ids = static_cast<const int32_t*>(dev_ids), .n_tokens = n_tokens, .n_embd = table.n_in};
  impl_->record(op);
}

void CudaBackend::rmsnorm(float* y, const float* x, const float* weight, int64_t n_tokens, int64_t n_embd, float eps) {
  check_rows("rmsnorm", n_tokens, n_embd);
  if (n_tokens == 0) return;
  if (x == nullptr || y == nullptr || weight == nullptr) {
    throw Error(Errc::invalid_argument, "cuda rmsnorm: null input, output or weight");
  }
  Op op(OpKind::rmsnorm);
  op.norm = {.y = y, .x = const_cast<float*>(x), .r = nullptr, .w = weight, .b = nullptr, .n_tokens = n_tokens,
             .n_embd = n_embd, .eps = eps};
  impl_->record(op);
}

void CudaBackend::layernorm(float* y, const float* x, const float* weight, const float* bias, int64_t n_tokens,
                            int64_t n_embd, float eps) {
  check_rows("layernorm", n_tokens, n_embd);
  if (n_tokens == 0) return;
  if (x == nullptr || y == nullptr || weight == nullptr) {
    throw Error(Errc::invalid_argument, "cuda layernorm: null input, output or weight");
  }
  Op op(OpKind::layernorm);
  op.norm = {.y = y, .x = const_cast<float*>(x), .r = nullptr, .w = weight, .b = bias, .n_tokens = n_tokens,
             .n_embd = n_embd, .eps = eps};
  impl_->record(op);
}

void CudaBackend::add(float* y, const float* x, int64_t n) {
  check_len("add", n);
  if (n == 0) return;
  Op op(OpKind::add);
  op.element = {.y = y, .a = x, .b = nullptr, .n = n, .n_cols = 0};
  impl_->record(op);
}

void CudaBackend::add_bias(float* y, const float* bias, int64_t n_rows, int64_t n_cols) {
  if (n_rows < 0 || n_cols <= 0) {
    throw Error(Errc::invalid_argument, "cuda add_bias: bad shape n_rows=" + std::to_string(n_rows) +
                                            " n_cols=" + std::to_string(n_cols));
  }
  if (n_rows == 0) return;
  Op op(OpKind::add_bias);
  op.element = {.y = y, .a = bias, .b = nullptr, .n = n_rows, .n_cols = n_cols};
  impl_->record(op);
}

void CudaBackend::rope(float* x, const int32_t* pos, int64_t n_tokens, int64_t n_head, int64_t head_dim,
                       const kernels::RopeParams& p) {
  const int64_t n_rot = p.n_rot == 0 ? head_dim : p.n_rot;
  if (n_tokens < 0 || n_head <= 0 || head_dim <= 0 || n_rot <= 0 || n_rot > head_dim || n_rot % 2 != 0) {
    throw Error(Errc::invalid_argument, "cuda rope: bad shape n_tokens=" + std::to_string(n_tokens) + " n_head=" +
                                            std::to_string(n_head) + " head_dim=" + std::to_string(head_dim) +
                                            " n_rot=" + std::to_string(n_rot) + " (n_rot must be even, <= head_dim)");
  }
  if (!(p.theta > 0.0f) || !std::isfinite(p.freq_scale) || !std::isfinite(p.mscale)) {
    throw Error(Errc::invalid_argument, "cuda rope: theta must be > 0 and freq_scale, mscale finite (theta=" +
                                            std::to_string(p.theta) + ", freq_scale=" + std::to_string(p.freq_scale) +
                                            ", mscale=" + std::to_string(p.mscale) + ")");
  }
  if (n_tokens == 0) return;
  if (x == nullptr || pos == nullptr) throw Error(Errc::invalid_argument, "cuda rope: null x or pos");
  Impl& m = *impl_;
  // The frequency table, in double and in the CPU kernel's exact arithmetic.
  const int64_t half = n_rot / 2;
  m.inv_freq.resize(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const double f = p.freq_factors != nullptr ? static_cast<double>(p.freq_factors[i]) : 1.0;
    m.inv_freq[static_cast<size_t>(i)] =
        std::pow(static_cast<double>(p.theta), -2.0 * static_cast<double>(i) / static_cast<double>(n_rot)) / f;
  }
  // Two blobs: if staging the second recycles the buffer, the first one's
  // slot is gone, so stage both again.
  const void* freqs = nullptr;
  const void* dev_pos = nullptr;
  for (uint64_t epoch = m.staging.epoch() - 1; epoch != m.staging.epoch();) {
    epoch = m.staging.epoch();
    freqs = m.stage(cuda::StageTag::rope_freqs, m.inv_freq.data(), m.inv_freq.size() * sizeof(double));
    dev_pos = m.stage(cuda::StageTag::positions, pos, static_cast<size_t>(n_tokens) * sizeof(int32_t));
  }
  Op op(OpKind::rope);
  op.rope = {.q = x, .k = nullptr, .pos = static_cast<const int32_t*>(dev_pos),
             .inv_freq = static_cast<const double*>(freqs), .n_tokens = n_tokens, .n_head = n_head, .n_head_kv = 0,
             .head_dim = head_dim, .n_rot = n_rot, .neox = p.layout == kernels::RopeLayout::neox ? 1 : 0,
             .freq_scale = static_cast<double>(p.freq_scale), .mscale = static_cast<double>(p.mscale)};
  m.record(op);
}

void CudaBackend::swiglu(float* y, const float* gate, const float* up, int64_t n) {
  check_len("swiglu", n);
  if (n == 0) return;
  Op op(OpKind::swiglu);
  op.element = {.y = y, .a = gate, .b = up, .n = n, .n_cols = 0};
  impl_->record(op);
}

void CudaBackend::swiglu_oai(float* y, const float* gate, const float* up, int64_t n, float alpha, float limit) {
  check_len("swiglu_oai", n);
  if (n == 0) return;
  Op op(OpKind::swiglu_oai);
  op.element = {.y = y, .a = gate, .b = up, .n = n, .n_cols = 0, .s = alpha, .s2 = limit};
  impl_->record(op);
}

void CudaBackend::gelu(float* y, const float* x, int64_t n) {
  check_len("gelu", n);
  if (n == 0) return;
  Op op(OpKind::gelu);
  op.element = {.y = y, .a = x, .b = nullptr, .n = n, .n_cols = 0};
  impl_->record(op);
}

void CudaBackend::gelu_erf(float* y, const float* x, int64_t n) {
  check_len("gelu_erf", n);
  if (n == 0) return;
  Op op(OpKind::gelu_erf);
  op.element = {.y = y, .a = x, .b = nullptr, .n = n, .n_cols = 0};
  impl_->record(op);
}

void CudaBackend::relu(float* y, const float* x, int64_t n) {
  check_len("relu", n);
  if (n == 0) return;
  Op op(OpKind::relu);
  op.element = {.y = y, .a = x, .b = nullptr, .n = n, .n_cols = 0};
  impl_->record(op);
}

void CudaBackend::quick_gelu(float* y, const float* x, int64_t n) {
  check_len("quick_gelu", n);
  if (n == 0) return;
  Op op(OpKind::quick_gelu);
  op.element = {.y = y, .a = x, .b = nullptr, .n = n, .n_cols = 0};
  impl_->record(op);
}

void CudaBackend::xielu(float* y, const float* x, int64_t n, float alpha_p, float alpha_n, float beta, float eps) {
  check_len("xielu", n);
  if (n == 0) return;
  if (y == nullptr || x == nullptr) throw Error(Errc::invalid_argument, "cuda xielu: null input or output");
  Op op(OpKind::xielu);
  op.element = {.y = y, .a = x, .b = nullptr, .n = n, .n_cols = 0, .s = alpha_p, .s2 = alpha_n, .s3 = beta, .s4 = eps};
  impl_->record(op);
}

void CudaBackend::geglu(float* y, const float* gate, const float* up, int64_t n) {
  check_len("geglu", n);
  if (n == 0) return;
  Op op(OpKind::geglu);
  op.element = {.y = y, .a = gate, .b = up, .n = n, .n_cols = 0};
  impl_->record(op);
}

void CudaBackend::geglu_erf(float* y, const float* gate, const float* up, int64_t n) {
  check_len("geglu_erf", n);
  if (n == 0) return;
  Op op(OpKind::geglu);
  op.element = {.y = y, .a = gate, .b = up, .n = n, .n_cols = 0, .s = 1.0};
  impl_->record(op);
}

void CudaBackend::scale(float* x, float s, int64_t n) {
  check_len("scale", n);
  if (n == 0) return;
  Op op(OpKind::scale);
  op.element = {.y = x, .a = nullptr, .b = nullptr, .n = n, .n_cols = 0, .s = static_cast<double>(s)};
  impl_->record(op);
}

void CudaBackend::soft_cap(float* x, float cap, int64_t n) {
  check_len("soft_cap", n);
  if (!(cap > 0.0f) || !std::isfinite(cap)) {
    throw Error(Errc::invalid_argument, "cuda soft_cap: cap must be finite and > 0, got " + std::to_string(cap));
  }
  if (n == 0) return;
  Op op(OpKind::soft_cap);
  op.element = {.y = x, .a = nullptr, .b = nullptr, .n = n, .n_cols = 0, .s = static_cast<double>(cap)};
  impl_->record(op);
}

void CudaBackend::gather_rows(float* y, const float* x, const int32_t* rows, int64_t n_rows, int64_t n_cols) {
  if (n_rows < 0 || n_rows > 0x7fffffff || n_cols <= 0) {
    throw Error(Errc::invalid_argument, "cuda gather_rows: bad shape n_rows=" + std::to_string(n_rows) +
                                            " n_cols=" + std::to_string(n_cols));
  }
  if (n_rows == 0) return;
  for (int64_t i = 0; i < n_rows; ++i) {
    if (rows[i] < 0) {
      throw Error(Errc::invalid_argument, "cuda gather_rows: negative row " + std::to_string(rows[i]));
    }
  }
  const void* dev_rows = impl_->stage(cuda::StageTag::rows, rows, static_cast<size_t>(n_rows) * sizeof(int32_t));
  Op op(OpKind::gather_rows);
  op.element = {.y = y, .a = x, .b = dev_rows, .n = n_rows, .n_cols = n_cols};
  impl_->record(op);
}

void CudaBackend::kv_write(const PagedKvView& kv, const float* k, const float* v, const AttnSeq* seqs, int n_seqs) {
  check_view("kv_write", kv);
  cuda::check_attn_seqs("kv_write", kv, seqs, n_seqs, false);
  Impl& m = *impl_;
  cuda::build_attn_plan(seqs, n_seqs, kv.block_size, m.plan);
  if (m.plan.max_q == 0) return;
  if (k == nullptr || v == nullptr) throw Error(Errc::invalid_argument, "cuda kv_write: null k or v");
  const void* meta = m.stage(cuda::StageTag::seqs, m.plan.blob.data(), m.plan.blob.size());
  Op op = attn_op(OpKind::kv_write, kv, m.plan, meta);
  op.attn.k = k;
  op.attn.v = v;
  m.record(op);
}

void CudaBackend::short_conv(float* y, const float* bcx, const PagedKvView& cache, const AttnSeq* seqs, int n_seqs,
                             const float* weight, const float* bias, int64_t taps) {
  if (cache.k == nullptr || cache.n_blocks <= 0 || cache.block_size <= 0 || cache.n_head_kv != 1 ||
      cache.head_dim <= 0 || (cache.type == KvType::q8_0 && cache.head_dim % kKvQ8Group != 0)) {
    throw Error(Errc::invalid_argument,
                "cuda short_conv: bad cache view (n_blocks=" + std::to_string(cache.n_blocks) + " block_size=" +
                    std::to_string(cache.block_size) + " rows=" + std::to_string(cache.n_head_kv) + " width=" +
                    std::to_string(cache.head_dim) + "; wants one row per token, a multiple of 32 for q8_0)");
  }
  if (taps < 1 || weight == nullptr) {
    throw Error(Errc::invalid_argument, "cuda short_conv: needs a weight of at least one tap, got " +
                                            std::to_string(taps));
  }
  // Every position from 0 is checked: the taps read back into the history.
  cuda::check_attn_seqs("short_conv", cache, seqs, n_seqs, true);
  Impl& m = *impl_;
  cuda::build_attn_plan(seqs, n_seqs, cache.block_size, m.plan);
  if (m.plan.max_q == 0) return;
  if (y == nullptr || bcx == nullptr) throw Error(Errc::invalid_argument, "cuda short_conv: null input or output");
  const void* meta = m.stage(cuda::StageTag::seqs, m.plan.blob.data(), m.plan.blob.size());
  Op op = attn_op(OpKind::short_conv, cache, m.plan, meta);
  op.attn.out = y;
  op.attn.q = bcx;
  op.attn.k = weight;
  op.attn.v = bias;
  op.attn.n_head = taps;
  m.record(op);
}

void CudaBackend::sigmoid_gate(float* y, const float* gate, int64_t n) {
  check_len("sigmoid_gate", n);
  if (n == 0) return;
  if (y == nullptr || gate == nullptr) throw Error(Errc::invalid_argument, "cuda sigmoid_gate: null input or output");
  Op op(OpKind::sigmoid_gate);
  op.element = {.y = y, .a = gate, .b = nullptr, .n = n, .n_cols = 0};
  impl_->record(op);
}

void CudaBackend::gated_delta_net(float* out, float* qkv, const float* b, const float* a, const PagedKvView& state,
                                  const AttnSeq* seqs, int n_seqs, const float* conv_w, const float* decay,
                                  const float* dt_bias, const kernels::GatedDeltaShape& g) {
  if (g.n_k_heads <= 0 || g.n_v_heads <= 0 || g.n_v_heads % g.n_k_heads != 0 || g.k_dim <= 0 ||
      g.k_dim > cuda::kGdnMaxKeyDim || g.v_dim <= 0 || g.taps < 1 || g.taps > cuda::kGdnMaxTaps ||
      g.n_v_heads > 65535) {
    throw Error(Errc::invalid_argument, "cuda gated_delta_net: bad shape (key heads " + std::to_string(g.n_k_heads) +
                                            ", value heads " + std::to_string(g.n_v_heads) + ", key width " +
                                            std::to_string(g.k_dim) + ", taps " + std::to_string(g.taps) + ")");
  }
  if (state.state == nullptr || state.state_floats != g.state_floats() || state.block_size <= 0) {
    throw Error(Errc::invalid_argument, "cuda gated_delta_net: the state slots hold " +
                                            std::to_string(state.state_floats) + " floats each, the layer needs " +
                                            std::to_string(g.state_floats()));
  }
  if (n_seqs < 0 || (n_seqs > 0 && seqs == nullptr)) {
    throw Error(Errc::invalid_argument, "cuda gated_delta_net: bad sequences");
  }
  for (int i = 0; i < n_seqs; ++i) {
    const AttnSeq& s = seqs[i];
    if (s.n_q < 0 || s.n_past < 0 || s.q_begin < 0 || s.state_slot < 0 || s.state_slot >= state.n_state_slots ||
        (s.n_q > 0 && s.block_table == nullptr)) {
      throw Error(Errc::invalid_argument, "cuda gated_delta_net: sequence " + std::to_string(i) +
                                              " has a negative count, no block table, or state slot " +
                                              std::to_string(s.state_slot) + " outside the " +
                                              std::to_string(state.n_state_slots) + " slots");
    }
  }
  Impl& m = *impl_;
  cuda::build_attn_plan(seqs, n_seqs, state.block_size, m.plan);
  if (m.plan.max_q == 0) return;
  if (out == nullptr || qkv == nullptr || b == nullptr || a == nullptr || conv_w == nullptr || decay == nullptr ||
      dt_bias == nullptr) {
    throw Error(Errc::invalid_argument, "cuda gated_delta_net: a null input or output");
  }
  const void* meta = m.stage(cuda::StageTag::seqs, m.plan.blob.data(), m.plan.blob.size());
  Op op(OpKind::gated_delta_net);
  op.gdn = {.out = out,
            .qkv = qkv,
            .b = b,
            .a = a,
            .state = state.state,
            .conv_w = conv_w,
            .decay = decay,
            .dt_bias = dt_bias,
            .meta = meta,
            .n_seqs = m.plan.n_seqs,
            .max_q = m.plan.max_q,
            .state_floats = state.state_floats,
            .n_k_heads = g.n_k_heads,
            .n_v_heads = g.n_v_heads,
            .k_dim = g.k_dim,
            .v_dim = g.v_dim,
            .taps = g.taps,
            .tiled = g.tiled ? 1 : 0};
  m.record(op);
}

void CudaBackend::mamba2_scan(float* y, float* proj, const PagedKvView& state, const AttnSeq* seqs, int n_seqs,
                              const kernels::Mamba2Weights& w, const kernels::Mamba2Shape& g) {
  if (g.n_heads <= 0 || g.n_heads > 65535 || g.head_dim <= 0 || g.n_groups <= 0 || g.n_heads % g.n_groups != 0 ||
      g.d_state <= 0 || g.d_state > cuda::kMamba2MaxState || g.taps < 1 || g.taps > cuda::kGdnMaxTaps) {
    throw Error(Errc::invalid_argument, "cuda mamba2_scan: bad shape (heads " + std::to_string(g.n_heads) + " of " +
                                            std::to_string(g.head_dim) + ", state " + std::to_string(g.d_state) +
                                            ", groups " + std::to_string(g.n_groups) + ", taps " +
                                            std::to_string(g.taps) + ")");
  }
  if (state.state == nullptr || state.state_floats != g.state_floats() || state.block_size <= 0) {
    throw Error(Errc::invalid_argument, "cuda mamba2_scan: the state slots hold " +
                                            std::to_string(state.state_floats) + " floats each, the layer needs " +
                                            std::to_string(g.state_floats()));
  }
  if (n_seqs < 0 || (n_seqs > 0 && seqs == nullptr)) {
    throw Error(Errc::invalid_argument, "cuda mamba2_scan: bad sequences");
  }
  int64_t n_tokens = 0;
  for (int i = 0; i < n_seqs; ++i) {
    const AttnSeq& s = seqs[i];
    if (s.n_q < 0 || s.n_past < 0 || s.q_begin < 0 || s.state_slot < 0 || s.state_slot >= state.n_state_slots ||
        (s.n_q > 0 && s.block_table == nullptr)) {
      throw Error(Errc::invalid_argument, "cuda mamba2_scan: sequence " + std::to_string(i) +
                                              " has a negative count, no block table, or state slot " +
                                              std::to_string(s.state_slot) + " outside the " +
                                              std::to_string(state.n_state_slots) + " slots");
    }
    n_tokens = std::max<int64_t>(n_tokens, static_cast<int64_t>(s.q_begin) + s.n_q);
  }
  Impl& m = *impl_;
  cuda::build_attn_plan(seqs, n_seqs, state.block_size, m.plan);
  if (m.plan.max_q == 0) return;
  if (y == nullptr || proj == nullptr || w.conv == nullptr || w.a == nullptr || w.dt_bias == nullptr ||
      w.d == nullptr || w.norm == nullptr) {
    throw Error(Errc::invalid_argument, "cuda mamba2_scan: a null input or output");
  }
  const void* meta = m.stage(cuda::StageTag::seqs, m.plan.blob.data(), m.plan.blob.size());
  Op op(OpKind::mamba2_scan);
  op.mamba2 = {.y = y,
               .proj = proj,
               .state = state.state,
               .conv = w.conv,
               .conv_bias = w.conv_bias,
               .a = w.a,
               .dt_bias = w.dt_bias,
               .d = w.d,
               .norm = w.norm,
               .meta = meta,
               .n_seqs = m.plan.n_seqs,
               .max_q = m.plan.max_q,
               .n_tokens = n_tokens,
               .state_floats = state.state_floats,
               .n_heads = g.n_heads,
               .head_dim = g.head_dim,
               .d_state = g.d_state,
               .n_groups = g.n_groups,
               .taps = g.taps,
               .norm_eps = w.norm_eps};
  m.record(op);
}

void CudaBackend::attention(float* out, const float* q, const PagedKvView& kv, const AttnSeq* seqs, int n_seqs,
                            int64_t n_head, float scale, int32_t window, float softcap, const float* sinks,
                            bool causal) {
  check_view("attention", kv);
  if (n_head <= 0 || n_head % kv.n_head_kv != 0 || n_head > 65535) {
    throw Error(Errc::invalid_argument, "cuda attention: n_head " + std::to_string(n_head) +
                                            " is not a positive multiple of n_head_kv " +
                                            std::to_string(kv.n_head_kv));
  }
  if (window < 0) throw Error(Errc::invalid_argument, "cuda attention: negative window " + std::to_string(window));
  if (!causal && window > 0) {
    throw Error(Errc::unsupported,
                "cuda attention: a window reaching both ways (ModernBERT's local layers) runs on the CPU only");
  }
  if (!(softcap >= 0.0f) || !std::isfinite(softcap)) {
    throw Error(Errc::invalid_argument,
                "cuda attention: softcap must be finite and >= 0, got " + std::to_string(softcap));
  }
  cuda::check_attn_seqs("attention", kv, seqs, n_seqs, true);
  for (int i = 0; !causal && i < n_seqs; ++i) {
    if (seqs[i].key_end != nullptr)
      throw Error(Errc::invalid_argument, "cuda attention: key_end needs causal attention");
  }
  Impl& m = *impl_;
  cuda::build_attn_plan(seqs, n_seqs, kv.block_size, m.plan);
  if (m.plan.n_dec == 0 && m.plan.n_tiles == 0) return;
  if (out == nullptr || q == nullptr) throw Error(Errc::invalid_argument, "cuda attention: null q or out");
  const cuda::DecodeSplit split = cuda::plan_decode_split(m.plan.n_dec, n_head, m.plan.bucket, window, m.ctx.n_sm());
  const int64_t partial = cuda::attention_partial_floats(m.plan.n_dec, n_head, split.n_splits, kv.head_dim);
  if (static_cast<size_t>(partial) * sizeof(float) + 256 > m.ctx.workspace_bytes()) {
    throw Error(Errc::out_of_memory, "cuda attention: split partials need " +
                                         std::to_string(partial * static_cast<int64_t>(sizeof(float))) +
                                         " bytes of workspace (raise CudaBackendOptions.workspace_bytes)");
  }
  const void* meta = m.stage(cuda::StageTag::seqs, m.plan.blob.data(), m.plan.blob.size());
  Op op = attn_op(OpKind::attention, kv, m.plan, meta);
  op.attn.out = out;
  op.attn.q = q;
  op.attn.n_head = n_head;
  op.attn.scale = scale;
  op.attn.window = window;
  op.attn.bidirectional = causal ? 0 : 1;
  op.attn.softcap = softcap;
  op.attn.sinks = sinks;
  op.attn.n_splits = split.n_splits;
  op.attn.split_len = split.split_len;
  op.attn.prefill_mma =
      m.mma_prefill && cuda::attention_prefill_mma_supported(m.ctx.cc_major(), m.ctx.smem_optin_bytes(), kv.head_dim)
          ? 1
          : 0;
  m.record(op);
}

}  // namespace troupe
