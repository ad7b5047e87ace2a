// DeepSeek's multi-head latent attention (MLA), run as ordinary attention
// over keys and values decompressed from the latent. The cache holds each
// head's key [rope | nope] and its value padded with zeros to the key's
// width, so the paged cache and every attention kernel serve it unchanged;
// the output's padding is dropped before o_proj. Heads are put together
// with gather_rows over chunks of gcd(nope, rope, v) floats, which every
// backend runs.
//
// Why [rope | nope] rather than the checkpoint's [nope | rope]: a score is
// a dot product, the same in either order, and with the roped dims first the
// RoPE kernel (which rotates a head's first n_rot dims) applies as it is.
// The rope dims rotate as ModelConfig::rope_layout says: in adjacent pairs
// for DeepSeek's interleaved rotation (V2; V3's rope_interleave).
#include <numeric>
#include <vector>

#include "core/error.hpp"
#include "model/layers.hpp"

namespace troupe::layers {

namespace {

struct MlaDims {
  int64_t h, nope, rope, v, d, rank, chunk;  // d = nope + rope: a head's key width in the cache
  explicit MlaDims(const ModelConfig& c)
      : h(c.n_head),
        nope(c.mla_nope_dim),
        rope(c.mla_rope_dim),
        v(c.mla_v_dim),
        d(c.head_dim),
        rank(c.mla_kv_rank),
        chunk(std::gcd(std::gcd(c.mla_nope_dim, c.mla_rope_dim), std::gcd(c.mla_v_dim, c.mla_kv_rank))) {}
  // The source buffer of the gathers, in chunks: kv_b's output, the roped
  // key part, the query, one chunk of zeros.
  int64_t kv_chunks(int64_t n) const { return n * h * (nope + v) / chunk; }
  int64_t kpe_at(int64_t n) const { return kv_chunks(n); }
  int64_t q_at(int64_t n) const { return kpe_at(n) + n * rope / chunk; }
  int64_t zero_at(int64_t n) const { return q_at(n) + n * h * d / chunk; }
};

}  // namespace

int64_t mla_scratch_floats(const ModelConfig& c, int64_t T) {
  if (c.mla_kv_rank <= 0) return 0;
  const MlaDims m(c);
  const int64_t src = m.zero_at(T) * m.chunk + m.chunk;
  // xb, proj; q_a; kv_a, its latent and rope parts; the source; q, k, v, att, att without padding.
  return T * (2 * c.n_embd + c.mla_q_rank + 2 * (m.rank + m.rope) + 5 * m.h * m.d) + src;
}

void mla_attention(const StepContext& ctx, int64_t il, const PagedKvView& kv, const float* xb, float* out) {
  const LayerWeights& w = ctx.weights.layers[static_cast<size_t>(il)];
  const ModelConfig& c = ctx.config;
  Backend& be = ctx.backend;
  HostScratch& hs = ctx.host;
  const int64_t n = ctx.n_tokens;
  const MlaDims m(c);
  const int64_t C = m.chunk;
  const size_t mark = ctx.arena.used();

  float* src = ctx.arena.floats(m.zero_at(n) * C + C);  // [chunks of C]
  float* kv_b = src;                                     // [n, h, nope + v]
  float* k_pe = src + m.kpe_at(n) * C;                   // [n, rope], roped, shared by the heads
  float* q_raw = src + m.q_at(n) * C;                    // [n, h, nope + rope]
  float* zero = src + m.zero_at(n) * C;                  // [C]

  // q = q_b(norm(q_a(x))), or q_proj(x).
  if (w.wq_a.data != nullptr) {
    float* qa = ctx.arena.floats(n * c.mla_q_rank);  // [n, q_rank]
    be.matmul(qa, xb, w.wq_a, n);
    be.rmsnorm(qa, qa, w.q_a_norm, n, c.mla_q_rank, c.norm_eps);
    be.matmul(q_raw, qa, w.wq, n);
  } else {
    be.matmul(q_raw, xb, w.wq, n);
  }
  // [latent | k_pe] = kv_a(x); the latent normed, then kv_b(latent).
  float* kva = ctx.arena.floats(n * (m.rank + m.rope));  // [n, rank + rope]
  float* latent = ctx.arena.floats(n * m.rank);          // [n, rank]
  be.matmul(kva, xb, w.wkv_a, n);
  const int64_t row_chunks = (m.rank + m.rope) / C;
  hs.rows.clear();
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < m.rank / C; ++j) hs.rows.push_back(static_cast<int32_t>(t * row_chunks + j));
  }
  be.gather_rows(latent, kva, hs.rows.data(), n * m.rank / C, C);
  hs.rows.clear();
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = m.rank / C; j < row_chunks; ++j) hs.rows.push_back(static_cast<int32_t>(t * row_chunks + j));
  }
  be.gather_rows(k_pe, kva, hs.rows.data(), n * m.rope / C, C);
  be.rmsnorm(latent, latent, w.kv_a_norm, n, m.rank, c.norm_eps);
  be.matmul(kv_b, latent, w.wkv_b, n);
  const std::vector<float> zeros(static_cast<size_t>(C), 0.0f);
  be.copy_from_host(zero, zeros.data(), zeros.size() * sizeof(float));

  const kernels::RopeParams p{.layout = c.rope_layout,
                              .n_rot = m.rope,
                              .theta = c.rope_theta,
                              .freq_scale = c.rope_freq_scale,
                              .freq_factors = c.rope_freq_factors.empty() ? nullptr : c.rope_freq_factors.data(),
                              .mscale = c.rope_mscale};
  be.rope(k_pe, ctx.pos, n, 1, m.rope, p);

  // Per head: q [q_pe | q_nope], k [k_pe | k_nope], v [v | zeros].
  float* q = ctx.arena.floats(n * m.h * m.d);    // [n, h, d]
  float* k = ctx.arena.floats(n * m.h * m.d);    // [n, h, d]
  float* v = ctx.arena.floats(n * m.h * m.d);    // [n, h, d]
  float* att = ctx.arena.floats(n * m.h * m.d);  // [n, h, d]
  const int64_t nope_c = m.nope / C, rope_c = m.rope / C, v_c = m.v / C, d_c = m.d / C;
  auto gather = [&](float* dst, auto&& chunk_of) {  // chunk_of(t, head, j) for j < d_c
    hs.rows.clear();
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t hd = 0; hd < m.h; ++hd) {
        for (int64_t j = 0; j < d_c; ++j) hs.rows.push_back(static_cast<int32_t>(chunk_of(t, hd, j)));
      }
    }
    be.gather_rows(dst, src, hs.rows.data(), n * m.h * d_c, C);
  };
  const int64_t kv_head_c = nope_c + v_c;
  gather(q, [&](int64_t t, int64_t hd, int64_t j) {
    const int64_t head = m.q_at(n) + (t * m.h + hd) * d_c;  // the checkpoint's [nope | rope]
    return j < rope_c ? head + nope_c + j : head + (j - rope_c);
  });
  gather(k, [&](int64_t t, int64_t hd, int64_t j) {
    return j < rope_c ? m.kpe_at(n) + t * rope_c + j : (t * m.h + hd) * kv_head_c + (j - rope_c);
  });
  gather(v, [&](int64_t t, int64_t hd, int64_t j) {
    return j < v_c ? (t * m.h + hd) * kv_head_c + nope_c + j : m.zero_at(n);
  });
  be.rope(q, ctx.pos, n, m.h, m.d, p);

  be.kv_write(kv, k, v, ctx.seqs, ctx.n_seqs);
  be.attention(att, q, kv, ctx.seqs, ctx.n_seqs, c.n_head, c.attn_scale, /*window=*/0, c.attn_softcap, nullptr,
               /*causal=*/true);
  // att [n, h, d] -> [n, h, v]: the values' padding dropped.
  float* att_v = ctx.arena.floats(n * m.h * m.v);  // [n, h, v]
  hs.rows.clear();
  for (int64_t r = 0; r < n * m.h; ++r) {
    for (int64_t j = 0; j < v_c; ++j) hs.rows.push_back(static_cast<int32_t>(r * d_c + j));
  }
  be.gather_rows(att_v, att, hs.rows.data(), n * m.h * v_c, C);
  be.matmul(out, att_v, w.wo, n);
  ctx.arena.rewind(mark);
}

}  // namespace troupe::layers
