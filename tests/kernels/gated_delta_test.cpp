// The Gated DeltaNet core (kernels/cpu/gated_delta.cpp) against a plain
// double-precision run of the rule as transformers writes its recurrent form
// (torch_recurrent_gated_delta_rule, after causal_conv1d_fn): whole
// sequences, prompts fed in chunks through a state slot (the same bits as one
// call), several sequences in one call, a slot left by another sequence
// (reset at n_past 0), grouped and tiled value heads, and bad slots.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu_kernels.hpp"
#include "tests/kernels/random_rows.hpp"

namespace troupe {
namespace {

// 2 key heads of 8, 4 value heads of 6 (two per key head), 4 taps.
constexpr kernels::GatedDeltaShape kShape{.n_k_heads = 2, .n_v_heads = 4, .k_dim = 8, .v_dim = 6, .taps = 4};

using test::max_abs_diff;

struct Layer {
  kernels::GatedDeltaShape shape = kShape;
  std::vector<float> conv_w, decay, dt_bias;
  explicit Layer(uint32_t seed, bool tiled = false) {
    shape.tiled = tiled;
    conv_w = test::normal_floats(static_cast<size_t>(shape.conv_dim() * shape.taps), seed, 0.5f);
    decay = test::normal_floats(static_cast<size_t>(shape.n_v_heads), seed + 1);
    for (float& d : decay) d = -std::exp(d);  // -exp(A_log)
    dt_bias = test::normal_floats(static_cast<size_t>(shape.n_v_heads), seed + 2);
  }
};

// One sequence's inputs: qkv [n, conv_dim], b and a [n, n_v].
struct Inputs {
  int64_t n = 0;
  std::vector<float> qkv, b, a;
  Inputs(int64_t n_tokens, uint32_t seed) : n(n_tokens) {
    qkv = test::normal_floats(static_cast<size_t>(n * kShape.conv_dim()), seed);
    b = test::normal_floats(static_cast<size_t>(n * kShape.n_v_heads), seed + 1);
    a = test::normal_floats(static_cast<size_t>(n * kShape.n_v_heads), seed + 2);
  }
};

// out [n, n_v, v_dim] from zero state, in doubles.
std::vector<float> reference(const Layer& L, const Inputs& in) {
  const kernels::GatedDeltaShape& g = L.shape;
  const int64_t C = g.conv_dim(), key_dim = g.n_k_heads * g.k_dim;
  std::vector<double> x(static_cast<size_t>(in.n * C));
  for (int64_t t = 0; t < in.n; ++t) {
    for (int64_t c = 0; c < C; ++c) {
      double acc = 0.0;
      for (int64_t k = 0; k < g.taps; ++k) {
        const int64_t p = t - (g.taps - 1) + k;
        if (p < 0) continue;
        const double w = L.conv_w[static_cast<size_t>(c * g.taps + k)];
        acc += w * in.qkv[static_cast<size_t>(p * C + c)];
      }
      x[static_cast<size_t>(t * C + c)] = acc / (1.0 + std::exp(-acc));
    }
  }
  std::vector<float> out(static_cast<size_t>(in.n * g.n_v_heads * g.v_dim));
  for (int64_t h = 0; h < g.n_v_heads; ++h) {
    const int64_t kh = g.tiled ? h % g.n_k_heads : h / (g.n_v_heads / g.n_k_heads);
    std::vector<double> S(static_cast<size_t>(g.k_dim * g.v_dim), 0.0);  // [k_dim, v_dim]
    for (int64_t t = 0; t < in.n; ++t) {
      const double* row = x.data() + t * C;
      std::vector<double> q(row + kh * g.k_dim, row + (kh + 1) * g.k_dim);
      std::vector<double> k(row + key_dim + kh * g.k_dim, row + key_dim + (kh + 1) * g.k_dim);
      const double* v = row + 2 * key_dim + h * g.v_dim;
      double qq = 0.0, kk = 0.0;
      for (int64_t i = 0; i < g.k_dim; ++i) qq += q[i] * q[i], kk += k[i] * k[i];
      for (int64_t i = 0; i < g.k_dim; ++i) {
        q[i] = q[i] / std::sqrt(qq + 1e-6) / std::sqrt(static_cast<double>(g.k_dim));
        k[i] /= std::sqrt(kk + 1e-6);
      }
      const double beta = 1.0 / (1.0 + std::exp(-in.b[static_cast<size_t>(t * g.n_v_heads + h)]));
      const double a = in.a[static_cast<size_t>(t * g.n_v_heads + h)];
      const double sp = std::log1p(std::exp(a + L.dt_bias[h]));
      const double decay = std::exp(L.decay[static_cast<size_t>(h)] * sp);
      for (double& s : S) s *= decay;
      for (int64_t j = 0; j < g.v_dim; ++j) {
        double mem = 0.0;
        for (int64_t i = 0; i < g.k_dim; ++i) mem += S[i * g.v_dim + j] * k[i];
        const double delta = (v[j] - mem) * beta;
        for (int64_t i = 0; i < g.k_dim; ++i) S[i * g.v_dim + j] += k[i] * delta;
        double o = 0.0;
        for (int64_t i = 0; i < g.k_dim; ++i) o += S[i * g.v_dim + j] * q[i];
        out[static_cast<size_t>((t * g.n_v_heads + h) * g.v_dim + j)] = static_cast<float>(o);
      }
    }
  }
  return out;
}

struct Slots {
  std::vector<float> data;
  PagedKvView view;
  Slots(int64_t n_slots, const kernels::GatedDeltaShape& g) {
    data.assign(static_cast<size_t>(n_slots * g.state_floats()), 7.0f);  // garbage, as a reused slot holds
    view.state = data.data();
    view.n_state_slots = n_slots;
    view.state_floats = g.state_floats();
  }
};

// Runs tokens [begin, end) of `in` as one call for one sequence.
std::vector<float> run_chunk(const Layer& L, const Inputs& in, int64_t begin, int64_t end, Slots& slots, int32_t slot,
                             ThreadPool& pool) {
  const int64_t C = L.shape.conv_dim(), hv = L.shape.n_v_heads;
  std::vector<float> qkv(in.qkv.begin() + begin * C, in.qkv.begin() + end * C);
  std::vector<float> out(static_cast<size_t>((end - begin) * hv * L.shape.v_dim));
  const AttnSeq s{.q_begin = 0, .n_q = static_cast<int32_t>(end - begin), .n_past = static_cast<int32_t>(begin),
                  .state_slot = slot};
  kernels::gated_delta_net(out.data(), qkv.data(), in.b.data() + begin * hv, in.a.data() + begin * hv, slots.view, &s,
                           1, L.conv_w.data(), L.decay.data(), L.dt_bias.data(), L.shape, pool);
  return out;
}

TEST(GatedDelta, WholeSequenceMatchesTheRecurrentRule) {
  ThreadPool pool(2);
  for (const bool tiled : {false, true}) {
    SCOPED_TRACE(tiled ? "tiled value heads" : "grouped value heads");
    const Layer L(11, tiled);
    const Inputs in(13, 21);
    Slots slots(3, L.shape);
    EXPECT_LT(max_abs_diff(run_chunk(L, in, 0, in.n, slots, 2, pool), reference(L, in)), 2e-5f);
  }
}

// A prompt fed in chunks carries its conv history and state through the
// slot: the same bits as one call (the tokens run in order either way).
TEST(GatedDelta, ChunksGiveTheBitsOfOneCall) {
  ThreadPool pool(2);
  const Layer L(12);
  const Inputs in(17, 22);
  Slots whole_slots(1, L.shape);
  const std::vector<float> whole = run_chunk(L, in, 0, in.n, whole_slots, 0, pool);
  for (const int64_t chunk : {1, 2, 3, 5}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    Slots slots(2, L.shape);
    std::vector<float> got;
    for (int64_t t = 0; t < in.n; t += chunk) {
      const std::vector<float> part = run_chunk(L, in, t, std::min(in.n, t + chunk), slots, 1, pool);
      got.insert(got.end(), part.begin(), part.end());
    }
    EXPECT_EQ(got, whole);
  }
}

// Several sequences in one call, each in its own slot, give what each gives
// alone; a slot another sequence left behind is started afresh at n_past 0.
TEST(GatedDelta, SequencesInOneCallAreIndependent) {
  ThreadPool pool(2);
  const Layer L(13);
  const Inputs a(9, 31), b(4, 32), c(1, 33);
  Slots slots(3, L.shape);
  // Slot 0 first holds another sequence's state.
  const Inputs other(6, 34);
  run_chunk(L, other, 0, other.n, slots, 0, pool);

  const int64_t hv = L.shape.n_v_heads;
  std::vector<float> qkv, bb, aa;
  std::vector<AttnSeq> seqs;
  int32_t row = 0;
  int32_t slot = 0;
  for (const Inputs* in : {&a, &b, &c}) {
    qkv.insert(qkv.end(), in->qkv.begin(), in->qkv.end());
    bb.insert(bb.end(), in->b.begin(), in->b.end());
    aa.insert(aa.end(), in->a.begin(), in->a.end());
    seqs.push_back({.q_begin = row, .n_q = static_cast<int32_t>(in->n), .n_past = 0, .state_slot = slot++});
    row += static_cast<int32_t>(in->n);
  }
  std::vector<float> out(static_cast<size_t>(row * hv * L.shape.v_dim));
  kernels::gated_delta_net(out.data(), qkv.data(), bb.data(), aa.data(), slots.view, seqs.data(), 3, L.conv_w.data(),
                           L.decay.data(), L.dt_bias.data(), L.shape, pool);
  size_t at = 0;
  for (const Inputs* in : {&a, &b, &c}) {
    Slots alone(1, L.shape);
    const std::vector<float> want = run_chunk(L, *in, 0, in->n, alone, 0, pool);
    const auto begin = out.begin() + static_cast<long>(at);
    EXPECT_EQ(std::vector<float>(begin, begin + static_cast<long>(want.size())), want);
    at += want.size();
  }
}

TEST(GatedDelta, BadSlotsAreRefused) {
  ThreadPool pool(1);
  const Layer L(14);
  const Inputs in(2, 41);
  Slots slots(2, L.shape);
  EXPECT_THROW(run_chunk(L, in, 0, 2, slots, 2, pool), Error);   // past the slots
  EXPECT_THROW(run_chunk(L, in, 0, 2, slots, -1, pool), Error);  // none given
  slots.view.state_floats -= 1;                                   // slots of another layer's shape
  EXPECT_THROW(run_chunk(L, in, 0, 2, slots, 0, pool), Error);
}

}  // namespace
}  // namespace troupe
