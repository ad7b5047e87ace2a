// Executing, fusing and hashing op records (see ops.hpp).
#include "kernels/cuda/ops.hpp"

#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/launchers.hpp"
#include "kernels/cuda/matmul.hpp"

namespace troupe::cuda {
namespace {

static_assert(std::is_trivially_copyable_v<Op>);
static_assert(sizeof(Op) % 8 == 0);
static_assert(kFusedGemvs == kGemvMaxMats, "a fused record holds what one gemv_n launch takes");
static_assert(sizeof(H2dOp) == 3 * 8 && sizeof(MatmulOp) == 7 * 8 && sizeof(GemvNOp) == 14 * 8 &&
                  sizeof(EmbeddingOp) == 6 * 8 &&
                  sizeof(NormOp) == 8 * 8 && sizeof(ElementOp) == 9 * 8 && sizeof(RopeOp) == 12 * 8 &&
                  sizeof(AttnOp) == 29 * 8 && sizeof(GdnOp) == 18 * 8 && sizeof(Mamba2Op) == 20 * 8,
              "op records must be padding-free: every field 8 bytes");

PagedKvView kv_view(const AttnOp& a) {
  return {.k = a.k_cache,
          .v = a.v_cache,
          .n_blocks = a.n_blocks,
          .block_size = a.block_size,
          .n_head_kv = a.n_head_kv,
          .head_dim = a.head_dim,
          .type = static_cast<KvType>(a.kv_type)};
}

AttnMeta attn_meta(const AttnOp& a) {
  const auto* base = static_cast<const unsigned char*>(a.meta);
  return {.seqs = reinterpret_cast<const DevSeq*>(base),
          .tables = reinterpret_cast<const int32_t*>(base + a.tables_off),
          .dec = reinterpret_cast<const int32_t*>(base + a.dec_off),
          .tiles = reinterpret_cast<const int32_t*>(base + a.tiles_off),
          .key_end = a.key_end_off >= 0 ? reinterpret_cast<const int32_t*>(base + a.key_end_off) : nullptr,
          .n_seqs = static_cast<int32_t>(a.n_seqs),
          .n_dec = static_cast<int32_t>(a.n_dec),
          .n_tiles = static_cast<int32_t>(a.n_tiles),
          .max_q = static_cast<int32_t>(a.max_q)};
}

// Address comparisons through uintptr_t: the buffers are unrelated objects.
bool disjoint(const float* a, int64_t na, const float* b, int64_t nb) {
  const auto pa = reinterpret_cast<uintptr_t>(a);
  const auto pb = reinterpret_cast<uintptr_t>(b);
  return pa + static_cast<uintptr_t>(na) * sizeof(float) <= pb || pb + static_cast<uintptr_t>(nb) * sizeof(float) <= pa;
}

bool same_or_disjoint(const float* a, const float* b, int64_t n) { return a == b || disjoint(a, n, b, n); }

}  // namespace

Op::Op(OpKind k) {
  std::memset(static_cast<void*>(this), 0, sizeof(Op));
  kind = k;
}

void execute(const Op& op, const DeviceContext& ctx) {
  cudaStream_t s = ctx.stream();
  switch (op.kind) {
    case OpKind::h2d:
      TROUPE_CUDA_CHECK(cudaMemcpyAsync(op.h2d.dst, op.h2d.src, static_cast<size_t>(op.h2d.bytes),
                                        cudaMemcpyHostToDevice, s));
      return;
    case OpKind::gemv_n: {
      const GemvNOp& g = op.gemv_n;
      gemv_n(g.y, g.x, g.w, g.n_out, static_cast<int>(g.n_mats), static_cast<DType>(g.type), g.n_tokens, g.n_in, s);
      return;
    }
    case OpKind::matmul: {
      const MatmulOp& m = op.matmul;
      matmul(ctx, m.y, m.x, {.data = m.w, .type = static_cast<DType>(m.type), .n_in = m.n_in, .n_out = m.n_out},
             m.n_tokens);
      return;
    }
    case OpKind::embedding: {
      const EmbeddingOp& e = op.embedding;
      embedding(e.y, e.table, static_cast<DType>(e.type), e.ids, e.n_tokens, e.n_embd, s);
      return;
    }
    case OpKind::rmsnorm:
      rmsnorm(op.norm.y, op.norm.x, op.norm.w, op.norm.n_tokens, op.norm.n_embd, static_cast<float>(op.norm.eps), s);
      return;
    case OpKind::add_rmsnorm:
      add_rmsnorm(op.norm.y, op.norm.x, op.norm.r, op.norm.w, op.norm.n_tokens, op.norm.n_embd,
                  static_cast<float>(op.norm.eps), s);
      return;
    case OpKind::layernorm:
      layernorm(op.norm.y, op.norm.x, op.norm.w, op.norm.b, op.norm.n_tokens, op.norm.n_embd,
                static_cast<float>(op.norm.eps), s);
      return;
    case OpKind::add: add(op.element.y, op.element.a, op.element.n, s); return;
    case OpKind::add_bias: add_bias(op.element.y, op.element.a, op.element.n, op.element.n_cols, s); return;
    case OpKind::swiglu:
      swiglu(op.element.y, op.element.a, static_cast<const float*>(op.element.b), op.element.n, s);
      return;
    case OpKind::gelu: gelu(op.element.y, op.element.a, op.element.n, s); return;
    case OpKind::gelu_erf: gelu_erf(op.element.y, op.element.a, op.element.n, s); return;
    case OpKind::relu: relu(op.element.y, op.element.a, op.element.n, s); return;
    case OpKind::quick_gelu: quick_gelu(op.element.y, op.element.a, op.element.n, s); return;
    case OpKind::xielu:
      xielu(op.element.y, op.element.a, op.element.n, static_cast<float>(op.element.s), static_cast<float>(op.element.s2),
            static_cast<float>(op.element.s3), static_cast<float>(op.element.s4), s);
      return;
    case OpKind::swiglu_oai:
      swiglu_oai(op.element.y, op.element.a, static_cast<const float*>(op.element.b), op.element.n,
                 static_cast<float>(op.element.s), static_cast<float>(op.element.s2), s);
      return;
    case OpKind::geglu:
      geglu(op.element.y, op.element.a, static_cast<const float*>(op.element.b), op.element.n, op.element.s != 0.0, s);
      return;
    case OpKind::scale: scale(op.element.y, static_cast<float>(op.element.s), op.element.n, s); return;
    case OpKind::soft_cap: soft_cap(op.element.y, static_cast<float>(op.element.s), op.element.n, s); return;
    case OpKind::gather_rows:
      gather_rows(op.element.y, op.element.a, static_cast<const int32_t*>(op.element.b), op.element.n,
                  op.element.n_cols, s);
      return;
    case OpKind::rope: {
      const RopeOp& r = op.rope;
      rope_qk(r.q, r.k, r.pos, r.n_tokens, r.n_head, r.n_head_kv, r.head_dim,
              {.n_rot = r.n_rot,
               .neox = r.neox != 0,
               .freq_scale = r.freq_scale,
               .mscale = r.mscale,
               .inv_freq = r.inv_freq},
              s);
      return;
    }
    case OpKind::kv_write: kv_write(kv_view(op.attn), op.attn.k, op.attn.v, attn_meta(op.attn), s); return;
    case OpKind::short_conv:
      short_conv(op.attn.out, op.attn.q, kv_view(op.attn), op.attn.k, op.attn.v, op.attn.n_head, attn_meta(op.attn),
                 s);
      return;
    case OpKind::sigmoid_gate: sigmoid_gate(op.element.y, op.element.a, op.element.n, s); return;
    case OpKind::gated_delta_net: {
      const GdnOp& d = op.gdn;
      const GdnArgs args{.out = d.out,
                         .qkv = d.qkv,
                         .b = d.b,
                         .a = d.a,
                         .state = d.state,
                         .state_floats = d.state_floats,
                         .conv_w = d.conv_w,
                         .decay = d.decay,
                         .dt_bias = d.dt_bias,
                         .n_k_heads = d.n_k_heads,
                         .n_v_heads = d.n_v_heads,
                         .k_dim = d.k_dim,
                         .v_dim = d.v_dim,
                         .taps = d.taps,
                         .tiled = d.tiled != 0};
      const AttnMeta meta{.seqs = static_cast<const DevSeq*>(d.meta),
                          .n_seqs = static_cast<int32_t>(d.n_seqs),
                          .max_q = static_cast<int32_t>(d.max_q)};
      gated_delta_net(args, meta, s);
      return;
    }
    case OpKind::mamba2_scan: {
      const Mamba2Op& d = op.mamba2;
      const Mamba2Args args{.y = d.y,
                            .proj = d.proj,
                            .state = d.state,
                            .state_floats = d.state_floats,
                            .conv = d.conv,
                            .conv_bias = d.conv_bias,
                            .a = d.a,
                            .dt_bias = d.dt_bias,
                            .d = d.d,
                            .norm = d.norm,
                            .norm_eps = static_cast<float>(d.norm_eps),
                            .n_heads = d.n_heads,
                            .head_dim = d.head_dim,
                            .d_state = d.d_state,
                            .n_groups = d.n_groups,
                            .taps = d.taps,
                            .n_tokens = d.n_tokens};
      const AttnMeta meta{.seqs = static_cast<const DevSeq*>(d.meta),
                          .n_seqs = static_cast<int32_t>(d.n_seqs),
                          .max_q = static_cast<int32_t>(d.max_q)};
      mamba2_scan(args, meta, s);
      return;
    }
    case OpKind::attention: {
      const AttnOp& a = op.attn;
      AttnArgs args{.n_head = a.n_head,
                    .scale = static_cast<float>(a.scale),
                    .window = static_cast<int32_t>(a.window),
                    .causal = a.bidirectional == 0,
                    .softcap = static_cast<float>(a.softcap),
                    .sinks = a.sinks,
                    .n_splits = static_cast<int32_t>(a.n_splits),
                    .split_len = static_cast<int32_t>(a.split_len),
                    .prefill_mma = a.prefill_mma != 0};
      const int64_t partial = attention_partial_floats(a.n_dec, a.n_head, a.n_splits, a.head_dim);
      if (partial > 0) {
        Scratch scratch(ctx);
        args.partials = static_cast<float*>(scratch.take(static_cast<size_t>(partial) * sizeof(float),
                                                         "attention split partials"));
      }
      attention(a.out, a.q, kv_view(a), attn_meta(a), args, s);
      return;
    }
  }
}

namespace {

// GEMV fusion (a fused launch of q, k, v or of gate, up) is on for 16-bit
// and f32 weights, whose kernels take no more registers for it; the block
// types' fused kernels take up to a third more (fewer warps a SM), so they
// wait for a GPU measurement. TROUPE_CUDA_FUSE_GEMV=0 turns it off (to
// measure what it saves, bench_cuda in scripts/gpu-check).
bool fuse_gemv(int64_t type) {
  static const bool on = [] {
    const char* s = std::getenv("TROUPE_CUDA_FUSE_GEMV");
    return s == nullptr || std::strcmp(s, "0") != 0;
  }();
  return on && !is_quantized(static_cast<DType>(type));
}

// A matmul of x that the GEMV runs, writing nothing that x or `others`
// (outputs of n_others matmuls fused before it) occupy.
bool gemv_fusable(const MatmulOp& m, const float* x, int64_t type, int64_t n_in, int64_t n_tokens,
                  float* const* others, const int64_t* others_n_out, int64_t n_others) {
  if (m.x != x || m.type != type || m.n_in != n_in || m.n_tokens != n_tokens || !fuse_gemv(type)) return false;
  if (!matmul_takes_gemv(m.w, static_cast<DType>(m.type), m.x, m.n_tokens, m.n_in)) return false;
  if (!disjoint(m.y, m.n_tokens * m.n_out, m.x, m.n_tokens * m.n_in)) return false;
  for (int64_t i = 0; i < n_others; ++i) {
    if (!disjoint(m.y, m.n_tokens * m.n_out, others[i], m.n_tokens * others_n_out[i])) return false;
  }
  return true;
}

}  // namespace

bool try_fuse(Op& prev, const Op& next) {
  if (next.kind == OpKind::matmul && prev.kind == OpKind::matmul) {
    const MatmulOp& a = prev.matmul;
    const MatmulOp& b = next.matmul;
    if (!gemv_fusable(a, a.x, a.type, a.n_in, a.n_tokens, nullptr, nullptr, 0) ||
        !gemv_fusable(b, a.x, a.type, a.n_in, a.n_tokens, &a.y, &a.n_out, 1)) {
      return false;
    }
    Op fused(OpKind::gemv_n);
    GemvNOp& g = fused.gemv_n;
    g = {.y = {a.y, b.y, nullptr}, .w = {a.w, b.w, nullptr}, .n_out = {a.n_out, b.n_out, 0}, .x = a.x,
         .type = a.type, .n_in = a.n_in, .n_tokens = a.n_tokens, .n_mats = 2};
    prev = fused;
    return true;
  }
  if (next.kind == OpKind::matmul && prev.kind == OpKind::gemv_n) {
    GemvNOp& g = prev.gemv_n;
    if (g.n_mats >= kFusedGemvs ||
        !gemv_fusable(next.matmul, g.x, g.type, g.n_in, g.n_tokens, g.y, g.n_out, g.n_mats)) {
      return false;
    }
    g.y[g.n_mats] = next.matmul.y;
    g.w[g.n_mats] = next.matmul.w;
    g.n_out[g.n_mats] = next.matmul.n_out;
    ++g.n_mats;
    return true;
  }
  if (prev.kind == OpKind::rope && next.kind == OpKind::rope) {
    RopeOp& a = prev.rope;
    const RopeOp& b = next.rope;
    if (a.k == nullptr && a.pos == b.pos && a.inv_freq == b.inv_freq && a.n_tokens == b.n_tokens &&
        a.head_dim == b.head_dim && a.n_rot == b.n_rot && a.neox == b.neox && a.freq_scale == b.freq_scale &&
        a.mscale == b.mscale &&
        disjoint(a.q, a.n_tokens * a.n_head * a.head_dim, b.q, b.n_tokens * b.n_head * b.head_dim)) {
      a.k = b.q;
      a.n_head_kv = b.n_head;
      return true;
    }
    return false;
  }
  if (prev.kind == OpKind::add && next.kind == OpKind::rmsnorm) {
    const ElementOp& a = prev.element;
    const NormOp& n = next.norm;
    const int64_t len = n.n_tokens * n.n_embd;
    if (n.x == a.y && len == a.n && same_or_disjoint(n.y, a.y, len) && same_or_disjoint(n.y, a.a, len)) {
      Op fused(OpKind::add_rmsnorm);
      fused.norm = {.y = n.y, .x = a.y, .r = a.a, .w = n.w, .b = nullptr, .n_tokens = n.n_tokens,
                    .n_embd = n.n_embd, .eps = n.eps};
      prev = fused;
      return true;
    }
  }
  return false;
}

uint64_t hash_ops(const std::vector<Op>& ops) {
  // FNV-1a over 64-bit words.
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* bytes = reinterpret_cast<const unsigned char*>(ops.data());
  const size_t n_words = ops.size() * sizeof(Op) / 8;
  for (size_t i = 0; i < n_words; ++i) {
    uint64_t w;
    std::memcpy(&w, bytes + i * 8, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  return h;
}

}  // namespace troupe::cuda
