// The lane attention (attention_lanes.hpp) for AVX2: the walk of
// attention_lanes_impl.hpp with a work item's rows in the 8 lanes of one to
// four registers. AVX2 has 16 registers, so a pass takes fewer keys (or
// head_dim values) as the registers of rows grow, keeping 8 to 12 FMA chains
// and every accumulator in a register.
#include "kernels/cpu/attention_lanes.hpp"

#include "core/cpu_features.hpp"
#include "core/error.hpp"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "kernels/cpu/kv_rows_avx2.hpp"

namespace troupe::kernels::cpu {
namespace {

struct Lanes8 {
  using Vec = __m256;
  using IVec = __m256i;
  static constexpr int kRows = 8;
  // At most 12 accumulators; the queries, weights and broadcast fill the 16
  // registers. 32 rows on a Zen 4 core (bench_attention --isa avx2, f32):
  // scoring 2 keys a pass and accumulating 2 values 52-61 GFLOP/s, 3 keys
  // 61-70; 4 values (16 accumulators, spilled) 40-60.
  template <int R>
  static constexpr int64_t kScoreKeys = R == 1 ? 8 : R == 2 ? 6 : R == 3 ? 4 : 3;
  template <int R>
  static constexpr int64_t kAccValues = R == 1 ? 8 : R == 2 ? 4 : R == 3 ? 4 : 2;

  static Vec zero() { return _mm256_setzero_ps(); }
  static Vec set1(float x) { return _mm256_set1_ps(x); }
  static Vec broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static Vec load(const float* p) { return _mm256_load_ps(p); }
  static void store(float* p, Vec v) { _mm256_store_ps(p, v); }
  static IVec load_i(const int32_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static Vec div(Vec a, Vec b) { return _mm256_div_ps(a, b); }
  static Vec exp(Vec x) { return exp_ps(x); }
  // st in the lanes whose row sees position pos (lo <= pos < hi), else neg_inf.
  static Vec visible(Vec st, IVec lo, IVec hi, int32_t pos, Vec neg_inf) {
    const __m256i p = _mm256_set1_epi32(pos);
    const __m256i seen = _mm256_andnot_si256(_mm256_cmpgt_epi32(lo, p), _mm256_cmpgt_epi32(hi, p));
    return _mm256_blendv_ps(neg_inf, st, _mm256_castsi256_ps(seen));
  }
  // m where it is not -inf, else 0.
  static Vec finite_or_zero(Vec m, Vec neg_inf) { return _mm256_and_ps(m, _mm256_cmp_ps(m, neg_inf, _CMP_NEQ_OQ)); }
  template <KvType T>
  static void row_to_f32(float* dst, const unsigned char* row, int64_t d) {
    cpu::row_to_f32<T>(dst, row, d);
  }
};

}  // namespace
}  // namespace troupe::kernels::cpu

#include "kernels/cpu/attention_lanes_impl.hpp"

namespace troupe::kernels::cpu {

bool lanes_available_avx2() { return isa_supported(Isa::avx2); }

void attend_lanes_avx2(const LaneItem& it, const PagedKvView& kv, const int32_t* block_table, int64_t kv_head,
                       float scale) {
  attend_lanes_with<Lanes8>("attend_lanes_avx2", it, kv, block_table, kv_head, scale);
}

}  // namespace troupe::kernels::cpu

#else

namespace troupe::kernels::cpu {

bool lanes_available_avx2() { return false; }

void attend_lanes_avx2(const LaneItem&, const PagedKvView&, const int32_t*, int64_t, float) {
  throw Error(Errc::internal, "attend_lanes_avx2: this build has no AVX2 path");
}

}  // namespace troupe::kernels::cpu

#endif
