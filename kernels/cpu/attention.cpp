// Causal grouped-query attention over the paged KV cache, for a batch that
// mixes prefill (many queries) and decode (one query) sequences, plus the
// kv_write that fills the cache first.
//
// Work is cut into items of (sequence, a few query heads of one kv head, a
// chunk of queries); threads pull items from a shared counter, heaviest
// (latest queries) first within each sequence. An item walks the visible key
// positions tile by tile, each tile inside one physical block; every
// (query, head) row of the item scores the tile while it is hot in L1 and
// folds it in with an online softmax (running max m, running sum l, output
// accumulated in place), so nothing of size [n_q, n_kv] is ever allocated.
// Items of 8 rows or more (prefill) run the same walk with the rows in the
// lanes of AVX-512 or AVX2 registers (attention_lanes.hpp).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/attention_lanes.hpp"
#include "kernels/cpu/attention_tiles.hpp"
#include "kernels/cpu/vec_ops.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe::kernels {
namespace {

constexpr int64_t kMaxRows = cpu::kLaneRows;  // (query, head) rows one item carries
constexpr int64_t kTile = 32;                 // key positions scored at once: K and V tiles stay in L1

std::string seq_name(int i) { return "sequence " + std::to_string(i); }

void check_view(const char* fn, const PagedKvView& kv) {
  if (kv.k == nullptr || kv.v == nullptr || kv.n_blocks <= 0 || kv.block_size <= 0 || kv.n_head_kv <= 0 ||
      kv.head_dim <= 0) {
    throw Error(Errc::invalid_argument,
                std::string(fn) + ": bad paged KV view (n_blocks=" + std::to_string(kv.n_blocks) + " block_size=" +
                    std::to_string(kv.block_size) + " n_head_kv=" + std::to_string(kv.n_head_kv) +
                    " head_dim=" + std::to_string(kv.head_dim) + ", k/v set: " + (kv.k && kv.v ? "yes" : "no") + ")");
  }
  if (kv.type != KvType::f32 && kv.type != KvType::f16 && kv.type != KvType::bf16 && kv.type != KvType::q8_0) {
    throw Error(Errc::invalid_argument, std::string(fn) + ": unknown KV cache type " +
                                            std::to_string(static_cast<int>(kv.type)));
  }
}

// Checks one sequence and the block-table entries covering positions
// [first_pos, n_past + n_q), so no kernel thread can read outside the cache.
void check_seq(const char* fn, const PagedKvView& kv, const AttnSeq& s, int i, bool whole_history) {
  if (s.n_q < 0 || s.n_past < 0 || s.q_begin < 0) {
    throw Error(Errc::invalid_argument, std::string(fn) + ": " + seq_name(i) + " has negative q_begin, n_q or n_past");
  }
  if (s.n_q == 0) return;
  if (s.block_table == nullptr) {
    throw Error(Errc::invalid_argument, std::string(fn) + ": " + seq_name(i) + " has no block table");
  }
  const int64_t end = static_cast<int64_t>(s.n_past) + s.n_q;
  if (s.key_end != nullptr) {
    for (int32_t q = 0; q < s.n_q; ++q) {
      const int64_t p = int64_t{s.n_past} + q;
      if (s.key_end[q] <= p || s.key_end[q] > end || (q > 0 && s.key_end[q] < s.key_end[q - 1])) {
        throw Error(Errc::invalid_argument, std::string(fn) + ": " + seq_name(i) + " query " + std::to_string(q) +
                                                " sees keys to " + std::to_string(s.key_end[q]) +
                                                ": before its own position, past the step's end " +
                                                std::to_string(end) + " or before the previous query's");
      }
    }
  }
  const int64_t first = whole_history ? 0 : s.n_past;
  for (int64_t b = first / kv.block_size; b < (end + kv.block_size - 1) / kv.block_size; ++b) {
    if (s.block_table[b] < 0 || s.block_table[b] >= kv.n_blocks) {
      throw Error(Errc::invalid_argument, std::string(fn) + ": " + seq_name(i) + " block table entry " +
                                              std::to_string(b) + " = " + std::to_string(s.block_table[b]) +
                                              " is outside the cache's " + std::to_string(kv.n_blocks) + " blocks");
    }
  }
}

using LaneKernel = void (*)(const cpu::LaneItem&, const PagedKvView&, const int32_t*, int64_t, float);

// The lane kernel of the active ISA, or null where it has none.
LaneKernel lane_kernel(Isa isa) {
  if (isa == Isa::avx512 && cpu::lanes_available_avx512()) return cpu::attend_lanes_avx512;
  if (isa == Isa::avx2 && cpu::lanes_available_avx2()) return cpu::attend_lanes_avx2;
  return nullptr;
}

struct AttnJob {
  float* out;
  const float* q;
  const PagedKvView* kv;
  const AttnSeq* seqs;
  const cpu::VecOps* ops;
  const cpu::KvTileOps* tiles;  // null for an f32 cache (ops' tiles read it)
  LaneKernel lanes;             // items of kLaneMinRows rows or more take it (null: none)
  LaneKernel wide;              // wide items (prefill, cpu::kWideMinQueries) take it: AMX or lanes (null: none)
  const int64_t* item_begin;    // [n_seqs + 1]: first item of each sequence
  int n_seqs;
  int64_t n_head;
  int64_t group;  // query heads per kv head
  int64_t hc;     // query heads per item (divides group)
  int64_t qc;     // queries per item
  int64_t qc_wide;  // queries per item of a sequence the wide kernel takes (wide set, cpu::kWideMinQueries)
  float scale;
  int32_t window;
  bool causal;          // false: every query sees the whole sequence
  float softcap;        // 0: off
  const float* sinks;   // [n_head] or null
  std::atomic<int64_t> next{0};
};

// Rows: queries [q0, q1) x heads [h0, h0 + hc) of sequence s, all reading kv
// head h0 / group.
void run_item(const AttnJob& job, const AttnSeq& s, int64_t q0, int64_t q1, int64_t h0) {
  const PagedKvView& kv = *job.kv;
  const int64_t d = kv.head_dim;
  const int64_t kvh = h0 / job.group;

  cpu::LaneItem it;  // the rows, ordered by query
  it.n_rows = 0;
  it.has_sinks = job.sinks != nullptr;
  for (int64_t qi = q0; qi < q1; ++qi) {
    const int64_t p = static_cast<int64_t>(s.n_past) + qi;
    const int64_t first = job.window > 0 ? std::max<int64_t>(0, p - job.window + 1) : 0;
    const int64_t end = static_cast<int64_t>(s.n_past) + s.n_q - 1;  // the sequence's last position
    // An encoder's window reaches as far ahead as behind (ModernBERT's local layers).
    const int64_t own = s.key_end != nullptr ? s.key_end[qi] - 1 : p;  // an image token sees its whole image
    const int64_t last = job.causal ? own : job.window > 0 ? std::min(end, p + job.window - 1) : end;
    for (int64_t h = h0; h < h0 + job.hc; ++h) {
      const int64_t row = (static_cast<int64_t>(s.q_begin) + qi) * job.n_head + h;
      it.lo[it.n_rows] = first;
      it.hi[it.n_rows] = last + 1;
      it.out[it.n_rows] = job.out + row * d;
      it.q[it.n_rows] = job.q + row * d;
      if (it.has_sinks) it.sink[it.n_rows] = job.sinks[h];
      ++it.n_rows;
    }
  }
  if (job.wide != nullptr && s.n_q >= cpu::kWideMinQueries && it.n_rows >= cpu::kLaneMinRows) {
    job.wide(it, kv, s.block_table, kvh, job.scale);
    return;
  }
  if (job.lanes != nullptr && it.n_rows >= cpu::kLaneMinRows) {
    job.lanes(it, kv, s.block_table, kvh, job.scale);
    return;
  }

  const cpu::VecOps& ops = *job.ops;
  const int64_t bs = kv.block_size;
  const int64_t stride = kv.slot_bytes();  // bytes between consecutive slots of one kv head
  const int64_t n_rows = it.n_rows;
  const int64_t* lo = it.lo;
  const int64_t* hi = it.hi;
  float* const* o = it.out;
  const float* const* qr = it.q;
  float m[kMaxRows], l[kMaxRows];
  for (int64_t r = 0; r < n_rows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
    std::memset(o[r], 0, static_cast<size_t>(d) * sizeof(float));
  }
  // Rows are ordered by query, and neither end of the visible range falls as
  // the query rises, so the union is [first row's lo, last row's hi).
  const int64_t u_lo = lo[0];
  const int64_t u_hi = hi[n_rows - 1];

  float sc[kTile];  // scores, then softmax weights, of one row on one tile
  for (int64_t t = u_lo; t < u_hi;) {
    const int64_t b = t / bs;
    const int64_t t_end = std::min({u_hi, (b + 1) * bs, t + kTile});
    const int64_t off = kv.byte_offset(s.block_table[b], t - b * bs, kvh);
    const auto* kt = static_cast<const unsigned char*>(kv.k) + off;
    const auto* vt = static_cast<const unsigned char*>(kv.v) + off;
    for (int64_t r = 0; r < n_rows; ++r) {
      const int64_t a = std::max(t, lo[r]);
      const int64_t e = std::min(t_end, hi[r]);
      if (a >= e) continue;
      const int64_t n = e - a;
      const unsigned char* ka = kt + (a - t) * stride;
      const unsigned char* va = vt + (a - t) * stride;
      if (job.tiles == nullptr) {
        ops.dot_tile(sc, qr[r], reinterpret_cast<const float*>(ka), stride / 4, n, d, job.scale);
      } else {
        job.tiles->dot_tile(sc, qr[r], ka, stride, n, d, job.scale);
      }
      if (job.softcap > 0.0f) {
        const float inv = 1.0f / job.softcap;
        for (int64_t i = 0; i < n; ++i) sc[i] = job.softcap * std::tanh(sc[i] * inv);
      }
      const float m_new = std::max(m[r], ops.max(sc, n));
      const float corr = std::exp(m[r] - m_new);  // 0 on the first tile (m = -inf)
      l[r] = l[r] * corr + ops.exp_sum(sc, m_new, n);
      if (job.tiles == nullptr) {
        ops.acc_tile(o[r], corr, sc, reinterpret_cast<const float*>(va), stride / 4, n, d);
      } else {
        job.tiles->acc_tile(o[r], corr, sc, va, stride, n, d);
      }
      m[r] = m_new;
    }
    t = t_end;
  }
  // Every row sees at least its own position, so l > 0 and m is finite. The
  // sink joins the denominator only.
  for (int64_t r = 0; r < n_rows; ++r) {
    const float sink = it.has_sinks ? std::exp(it.sink[r] - m[r]) : 0.0f;
    ops.scale(o[r], 1.0f / (l[r] + sink), d);
  }
}

void run_items(AttnJob& job) {
  const int64_t n_items = job.item_begin[job.n_seqs];
  const int64_t h_chunks = job.n_head / job.hc;
  for (;;) {
    const int64_t it = job.next.fetch_add(1, std::memory_order_relaxed);
    if (it >= n_items) return;
    const int64_t* sp = std::upper_bound(job.item_begin, job.item_begin + job.n_seqs + 1, it) - 1;
    const AttnSeq& s = job.seqs[sp - job.item_begin];
    const int64_t r = it - *sp;
    const int64_t qc = job.wide != nullptr && s.n_q >= cpu::kWideMinQueries ? job.qc_wide : job.qc;
    const int64_t q_chunks = (s.n_q + qc - 1) / qc;
    const int64_t qk = q_chunks - 1 - r / h_chunks;  // last (longest) query chunk first
    const int64_t q0 = qk * qc;
    run_item(job, s, q0, std::min<int64_t>(s.n_q, q0 + qc), (r % h_chunks) * job.hc);
  }
}

// Items of sequence s: its query chunks (qc_wide queries where the wide kernel
// takes it) times the head chunks.
int64_t seq_items(const AttnSeq& s, int64_t n_head, int64_t hc, int64_t qc, int64_t qc_wide, bool wide) {
  const int64_t c = wide && s.n_q >= cpu::kWideMinQueries ? qc_wide : qc;
  return (s.n_q + c - 1) / c * (n_head / hc);
}

int64_t count_items(const AttnSeq* seqs, int n_seqs, int64_t n_head, int64_t hc, int64_t qc, int64_t qc_wide,
                    bool wide) {
  int64_t n = 0;
  for (int i = 0; i < n_seqs; ++i) n += seq_items(seqs[i], n_head, hc, qc, qc_wide, wide);
  return n;
}

// The largest divisor of `group` that is <= cap.
int64_t divisor_at_most(int64_t group, int64_t cap) {
  for (int64_t h = std::min(group, cap); h > 1; --h) {
    if (group % h == 0) return h;
  }
  return 1;
}

}  // namespace

void kv_write(const PagedKvView& kv, const float* k, const float* v, const AttnSeq* seqs, int n_seqs) {
  check_view("kv_write", kv);
  if (n_seqs < 0 || (n_seqs > 0 && seqs == nullptr)) throw Error(Errc::invalid_argument, "kv_write: bad sequences");
  for (int i = 0; i < n_seqs; ++i) check_seq("kv_write", kv, seqs[i], i, false);
  const int64_t row = kv.n_head_kv * kv.head_dim;  // one token's keys: [n_head_kv, head_dim]
  auto* kc = static_cast<unsigned char*>(kv.k);
  auto* vc = static_cast<unsigned char*>(kv.v);
  // A 16- or 8-bit cache: the ISA's conversion (a scalar one cost a 512-token
  // prefill 15% with an f16 cache, docs/performance.md).
  const auto write_row = kv.type == KvType::f32 ? nullptr : cpu::kv_tile_ops(kv.type, active_isa()).write_row;
  for (int i = 0; i < n_seqs; ++i) {
    const AttnSeq& s = seqs[i];
    if (s.n_q > 0 && (k == nullptr || v == nullptr)) throw Error(Errc::invalid_argument, "kv_write: null k or v");
    for (int64_t j = 0; j < s.n_q; ++j) {
      const int64_t p = static_cast<int64_t>(s.n_past) + j;
      const int64_t off = kv.byte_offset(s.block_table[p / kv.block_size], p % kv.block_size, 0);
      const int64_t src = (static_cast<int64_t>(s.q_begin) + j) * row;
      if (kv.type == KvType::f32) {  // a token's rows are contiguous: one copy
        std::memcpy(kc + off, k + src, static_cast<size_t>(row) * sizeof(float));
        std::memcpy(vc + off, v + src, static_cast<size_t>(row) * sizeof(float));
        continue;
      }
      for (int64_t h = 0; h < kv.n_head_kv; ++h) {
        const int64_t o = off + h * kv.row_bytes();
        write_row(kc + o, k + src + h * kv.head_dim, kv.head_dim);
        write_row(vc + o, v + src + h * kv.head_dim, kv.head_dim);
      }
    }
  }
}

void attention(float* out, const float* q, const PagedKvView& kv, const AttnSeq* seqs, int n_seqs, int64_t n_head,
               float scale, ThreadPool& pool, int32_t window, float softcap, const float* sinks, bool causal) {
  check_view("attention", kv);
  if (n_head <= 0 || n_head % kv.n_head_kv != 0) {
    throw Error(Errc::invalid_argument, "attention: n_head " + std::to_string(n_head) +
                                            " is not a positive multiple of n_head_kv " + std::to_string(kv.n_head_kv));
  }
  if (window < 0) throw Error(Errc::invalid_argument, "attention: negative window " + std::to_string(window));
  if (!(softcap >= 0.0f) || !std::isfinite(softcap)) {
    throw Error(Errc::invalid_argument, "attention: softcap must be finite and >= 0, got " + std::to_string(softcap));
  }
  if (n_seqs < 0 || (n_seqs > 0 && seqs == nullptr)) throw Error(Errc::invalid_argument, "attention: bad sequences");
  for (int i = 0; i < n_seqs; ++i) {
    check_seq("attention", kv, seqs[i], i, true);
    if (!causal && seqs[i].key_end != nullptr) {
      throw Error(Errc::invalid_argument, "attention: key_end needs causal attention (" + seq_name(i) + ")");
    }
  }

  // The lane kernel rounds differently from decode's tile kernels, so a
  // token's bits would depend on how many queries shared its item:
  // batch-invariant math keeps the tile kernels for every item. Soft-capping
  // (Gemma 2) is applied to the tile kernels' scores, so it keeps them too.
  // The AMX kernel rounds q, k, v and the weights to bf16: it takes caches
  // already rounded to 16 bits or fewer (an f32 cache asked for f32
  // attention), and exact math keeps f32. Wide items of prefill sequences
  // take the AMX kernel where it runs, else the lane kernel's wide walk.
  const LaneKernel lanes =
      batch_invariant() || softcap > 0.0f || kv.head_dim > cpu::kLaneMaxHeadDim ? nullptr : lane_kernel(active_isa());
  const LaneKernel wide = lanes != nullptr && kv.type != KvType::f32 && !exact_math() && cpu::amx_attention_available()
                              ? cpu::attend_amx_bf16
                              : lanes;

  const int64_t group = n_head / kv.n_head_kv;
  // Start with as many heads of a group and queries per item as fit in
  // kMaxRows (cpu::kWideRows for the wide kernel: they share each K/V tile),
  // then split finer until every thread has a few items to balance with.
  int64_t hc = divisor_at_most(group, kMaxRows);
  int64_t qc = std::max<int64_t>(1, kMaxRows / hc);
  int64_t qc_wide = std::max<int64_t>(1, cpu::kWideRows / hc);
  const int64_t target = pool.size() > 1 ? 4 * static_cast<int64_t>(pool.size()) : 1;
  while (count_items(seqs, n_seqs, n_head, hc, qc, qc_wide, wide != nullptr) < target) {
    if (qc_wide > qc) {
      qc_wide = std::max(qc, qc_wide / 2);
    } else if (qc > 1) {
      qc /= 2;
      qc_wide = qc;
    } else if (hc > 1) {
      hc = divisor_at_most(group, hc - 1);
    } else {
      break;
    }
  }
  if (out == nullptr || q == nullptr) {
    if (count_items(seqs, n_seqs, n_head, hc, qc, qc_wide, wide != nullptr) == 0) return;
    throw Error(Errc::invalid_argument, "attention: null q or out");
  }

  // Per calling thread, reused across calls: no allocation after the first.
  thread_local std::vector<int64_t> item_begin;
  item_begin.resize(static_cast<size_t>(n_seqs) + 1);
  item_begin[0] = 0;
  for (int i = 0; i < n_seqs; ++i) {
    item_begin[i + 1] = item_begin[i] + seq_items(seqs[i], n_head, hc, qc, qc_wide, wide != nullptr);
  }
  const int64_t n_items = item_begin[static_cast<size_t>(n_seqs)];
  if (n_items == 0) return;

  AttnJob job{.out = out,
              .q = q,
              .kv = &kv,
              .seqs = seqs,
              .ops = &cpu::vec_ops(),
              .tiles = kv.type == KvType::f32 ? nullptr : &cpu::kv_tile_ops(kv.type, active_isa()),
              .lanes = lanes,
              .wide = wide,
              .item_begin = item_begin.data(),
              .n_seqs = n_seqs,
              .n_head = n_head,
              .group = group,
              .hc = hc,
              .qc = qc,
              .qc_wide = qc_wide,
              .scale = scale,
              .window = window,
              .causal = causal,
              .softcap = softcap,
              .sinks = sinks};
  if (n_items == 1 || pool.size() == 1) {
    run_items(job);
    return;
  }
  // One pointer captured, so std::function keeps it inline (no allocation).
  AttnJob* jp = &job;
  pool.run([jp](int, int) { run_items(*jp); });
}

}  // namespace troupe::kernels
