// The lane attention (attention_lanes.hpp) for AVX-512: the walk of
// attention_lanes_impl.hpp with a work item's rows in the 16 lanes of one
// register (up to 16 rows) or two. Two registers (17 to 32 rows) give each
// pass 16 FMA chains and use every broadcast key or value twice: one
// register's 8 chains only just cover the FMA latency.
#include "kernels/cpu/attention_lanes.hpp"

#include "core/cpu_features.hpp"
#include "core/error.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__FMA__)
#include "kernels/cpu/kv_rows_avx512.hpp"

namespace troupe::kernels::cpu {
namespace {

struct Lanes16 {
  using Vec = __m512;
  using IVec = __m512i;
  static constexpr int kRows = 16;
  template <int R>
  static constexpr int64_t kScoreKeys = 8;  // 8 or 16 accumulators of 32 registers
  template <int R>
  static constexpr int64_t kAccValues = 8;

  static Vec zero() { return _mm512_setzero_ps(); }
  static Vec set1(float x) { return _mm512_set1_ps(x); }
  static Vec broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static Vec load(const float* p) { return _mm512_load_ps(p); }
  static void store(float* p, Vec v) { _mm512_store_ps(p, v); }
  static IVec load_i(const int32_t* p) { return _mm512_load_si512(p); }
  static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
  static Vec div(Vec a, Vec b) { return _mm512_div_ps(a, b); }
  static Vec exp(Vec x) { return exp_ps(x); }
  // st in the lanes whose row sees position pos (lo <= pos < hi), else neg_inf.
  static Vec visible(Vec st, IVec lo, IVec hi, int32_t pos, Vec neg_inf) {
    const __m512i p = _mm512_set1_epi32(pos);
    const __mmask16 seen = _mm512_cmp_epi32_mask(lo, p, _MM_CMPINT_LE) & _mm512_cmp_epi32_mask(p, hi, _MM_CMPINT_LT);
    return _mm512_mask_mov_ps(neg_inf, seen, st);
  }
  // m where it is not -inf, else 0.
  static Vec finite_or_zero(Vec m, Vec neg_inf) {
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(m, neg_inf, _CMP_NEQ_OQ), m);
  }
  template <KvType T>
  static void row_to_f32(float* dst, const unsigned char* row, int64_t d) {
    cpu::row_to_f32<T>(dst, row, d);
  }
};

}  // namespace
}  // namespace troupe::kernels::cpu

#include "kernels/cpu/attention_lanes_impl.hpp"

namespace troupe::kernels::cpu {

bool lanes_available_avx512() { return isa_supported(Isa::avx512); }

void attend_lanes_avx512(const LaneItem& it, const PagedKvView& kv, const int32_t* block_table, int64_t kv_head,
                         float scale) {
  attend_lanes_with<Lanes16>("attend_lanes_avx512", it, kv, block_table, kv_head, scale);
}

}  // namespace troupe::kernels::cpu

#else

namespace troupe::kernels::cpu {

bool lanes_available_avx512() { return false; }

void attend_lanes_avx512(const LaneItem&, const PagedKvView&, const int32_t*, int64_t, float) {
  throw Error(Errc::internal, "attend_lanes_avx512: this build has no AVX-512 path");
}

}  // namespace troupe::kernels::cpu

#endif
