// Queries that see past themselves (AttnSeq::key_end: Gemma 3's image
// tokens see their whole image) on every CPU attention path, and the
// AMX-BF16 prefill (kernels/cpu/attention_amx.cpp) against a reference over
// the values it rounds, through attention_reference.hpp's harness.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "attention_reference.hpp"
#include "core/error.hpp"

namespace troupe {
namespace {

using test::Case;
using test::run_case;

// Gemma 3's images: the queries of an open block see every key of the
// block, later ones included, and the rest of the sequence causally (with
// a sliding window too: it bounds the keys behind), on the lane kernel
// (prefill items) and the tile kernels, f32 and quantized caches. One
// sequence continues a history that ends inside a block.
TEST(Attention, OpenBlocksSeeTheirWholeBlock) {
  uint32_t seed = 900;
  for (Isa isa : test::runnable_isas()) {
    test::ForcedIsa forced(isa);
    for (KvType type : {KvType::f32, KvType::f16, KvType::q8_0}) {
      for (int32_t window : {0, 6}) {
        const Case c{.type = type,
                     .n_head = 4,
                     .n_head_kv = 2,
                     .head_dim = 32,
                     .block_size = 16,
                     .window = window,
                     .threads = seed % 2 == 0 ? 1 : 3,
                     .q_scale = 2.0f,
                     .seqs = {{0, 45, {3, 19, 25, 41}}, {0, 1}, {20, 30, {17, 33}}, {7, 9, {7, 16}}, {40, 1}}};
        run_case(c, isa, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The AMX-BF16 prefill over 16- and 8-bit caches: sequences whose every item
// holds 8 rows or more (one thread: items of 128 (query, head) rows, then
// the tail), chunked after a history, with a window, open blocks and sinks,
// head sizes that do and do not fill 32 lanes, beside decodes (the f32
// kernels).
TEST(Attention, AmxPrefillMatchesTheRoundedReference) {
  if (!kernels::cpu::amx_attention_available()) {
    std::printf("[ SKIPPED  ] the AMX-BF16 attention: this CPU has no AMX (or it is turned off)\n");
    return;
  }
  uint32_t seed = 1200;
  for (KvType type : {KvType::f16, KvType::bf16, KvType::q8_0}) {  // an f32 cache keeps f32 attention
    for (int64_t head_dim : {64, 72, 128, 256}) {
      if (type == KvType::q8_0 && head_dim % 32 != 0) continue;
      for (int32_t window : {0, 20}) {
        const Case c{.type = type,
                     .n_head = 8,
                     .n_head_kv = 2,
                     .head_dim = head_dim,
                     .block_size = 16,
                     .window = window,
                     .threads = 1,
                     .q_scale = 3.0f,
                     .seqs = {{0, 48}, {30, 44, {30, 50}}, {5, 1}, {0, 42, {3, 19}}, {100, 1}},
                     .sinks = seed % 3 == 0,
                     .amx = true};
        run_case(c, Isa::avx512, seed++);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Key ends before a query's own position, past the step or falling are refused.
TEST(Attention, RefusesKeyEndsOutsideTheStep) {
  std::vector<float> kc(4 * 16 * 8), vc(kc.size()), q(8 * 8), out(q.size());
  const PagedKvView view{
      .k = kc.data(), .v = vc.data(), .n_blocks = 4, .block_size = 16, .n_head_kv = 1, .head_dim = 8};
  const std::vector<int32_t> table = {0};
  ThreadPool pool(1);
  for (const std::vector<int32_t>& ends : std::vector<std::vector<int32_t>>{
           {1, 2, 3, 4, 5, 6, 7, 9}, {1, 2, 2, 4, 5, 6, 7, 8}, {4, 4, 3, 4, 8, 8, 8, 8}}) {
    const AttnSeq seq{.q_begin = 0, .n_q = 8, .n_past = 0, .block_table = table.data(), .key_end = ends.data()};
    EXPECT_THROW(kernels::attention(out.data(), q.data(), view, &seq, 1, 1, 1.0f, pool), Error);
  }
}

}  // namespace
}  // namespace troupe
