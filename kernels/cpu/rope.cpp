// Rotary position embedding, in place on queries or keys. Pair i of a head
// turns by pos * freq_scale / (theta^(2i/n_rot) * freq_factors[i]) and is
// scaled by mscale; angles are
// formed in double so long positions keep their precision, and each token's
// cos/sin table is shared by all its heads.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe::kernels {
namespace {

// One thread's cos/sin tables: the inverse frequencies of the last
// parameters seen and the angles of the last call's positions. A step ropes
// the queries and keys of every layer at the same positions, so all but the
// first of its 2 x n_layer calls reuse them: pow, cos and sin in double cost
// ~9 us a layer for one 64-dim token (a serial part of every 2-thread decode
// step that the other thread waits out), and 0.7-1.2% of a 512-token
// prefill when each call redid them.
class RopeTable {
 public:
  // Whether the table is for p; the factors are compared by value.
  bool holds(const RopeParams& p, int64_t n_rot) const {
    // No factors: factors_ empty (half >= 1, so a factor list never is).
    const float* f_end = p.freq_factors == nullptr ? nullptr : p.freq_factors + n_rot / 2;
    return n_rot_ == n_rot && theta_ == p.theta && freq_scale_ == p.freq_scale && mscale_ == p.mscale &&
           std::equal(factors_.begin(), factors_.end(), p.freq_factors, f_end);
  }

  // Makes the table current for p.
  void set(const RopeParams& p, int64_t n_rot) {
    if (holds(p, n_rot)) return;
    const int64_t half = n_rot / 2;
    const float* f_end = p.freq_factors == nullptr ? nullptr : p.freq_factors + half;
    n_rot_ = n_rot;
    theta_ = p.theta;
    freq_scale_ = p.freq_scale;
    mscale_ = p.mscale;
    factors_.assign(p.freq_factors, f_end);
    inv_freq_.resize(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) {
      const double f = factors_.empty() ? 1.0 : static_cast<double>(factors_[static_cast<size_t>(i)]);
      inv_freq_[static_cast<size_t>(i)] =
          std::pow(static_cast<double>(p.theta), -2.0 * static_cast<double>(i) / static_cast<double>(n_rot)) / f;
    }
    pos_.clear();
  }

  // [n][2][half]: for token t, the cos, then the sin, of pair i's angle at
  // pos[t], times mscale.
  const float* cos_sin(const int32_t* pos, int64_t n) {
    if (std::equal(pos_.begin(), pos_.end(), pos, pos + n)) return cs_.data();
    const size_t half = inv_freq_.size();
    pos_.assign(pos, pos + n);
    cs_.resize(static_cast<size_t>(n) * 2 * half);
    for (int64_t t = 0; t < n; ++t) {
      float* c = cs_.data() + static_cast<size_t>(t) * 2 * half;
      const double scaled_pos = static_cast<double>(pos[t]) * static_cast<double>(freq_scale_);
      for (size_t i = 0; i < half; ++i) {
        const double angle = scaled_pos * inv_freq_[i];
        c[i] = static_cast<float>(std::cos(angle) * mscale_);
        c[half + i] = static_cast<float>(std::sin(angle) * mscale_);
      }
    }
    return cs_.data();
  }

 private:
  int64_t n_rot_ = 0;
  float theta_ = 0.0f, freq_scale_ = 0.0f, mscale_ = 0.0f;
  std::vector<float> factors_;
  std::vector<double> inv_freq_;  // [half]
  std::vector<int32_t> pos_;      // the positions cs_ holds
  std::vector<float> cs_;         // [pos_.size()][2][half]
};

// Per thread: no lock, no allocation after the first calls. Two tables, as
// Gemma 3 interleaves layers of two RoPE bases: one table would redo its
// angles at each change of kind, 8 times a step for the 26-layer 1B.
RopeTable& rope_table(const RopeParams& p, int64_t n_rot) {
  thread_local RopeTable tables[2];
  thread_local int last = 0;
  if (tables[last].holds(p, n_rot)) return tables[last];
  last = 1 - last;  // the other one, or else the one used less recently
  tables[last].set(p, n_rot);
  return tables[last];
}

}  // namespace

void rope(float* x, const int32_t* pos, int64_t n_tokens, int64_t n_head, int64_t head_dim, const RopeParams& p) {
  const int64_t n_rot = p.n_rot == 0 ? head_dim : p.n_rot;
  if (n_tokens < 0 || n_head <= 0 || head_dim <= 0 || n_rot <= 0 || n_rot > head_dim || n_rot % 2 != 0) {
    throw Error(Errc::invalid_argument, "rope: bad shape n_tokens=" + std::to_string(n_tokens) + " n_head=" +
                                            std::to_string(n_head) + " head_dim=" + std::to_string(head_dim) +
                                            " n_rot=" + std::to_string(n_rot) + " (n_rot must be even, <= head_dim)");
  }
  if (!(p.theta > 0.0f) || !std::isfinite(p.freq_scale) || !std::isfinite(p.mscale)) {
    throw Error(Errc::invalid_argument,
                "rope: theta must be > 0 and freq_scale, mscale finite (theta=" + std::to_string(p.theta) +
                    ", freq_scale=" + std::to_string(p.freq_scale) + ", mscale=" + std::to_string(p.mscale) + ")");
  }
  if (n_tokens == 0) return;
  if (x == nullptr || pos == nullptr) throw Error(Errc::invalid_argument, "rope: null x or pos");

  const int64_t half = n_rot / 2;
  const float* table = rope_table(p, n_rot).cos_sin(pos, n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* cs = table + t * 2 * half;
    const float* cosv = cs;
    const float* sinv = cs + half;
    // Dims >= n_rot pass through. One loop per layout, so each vectorizes.
    if (p.layout == RopeLayout::normal) {  // pairs (2i, 2i+1)
      for (int64_t h = 0; h < n_head; ++h) {
        float* xh = x + (t * n_head + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const float x0 = xh[2 * i], x1 = xh[2 * i + 1];
          xh[2 * i] = x0 * cosv[i] - x1 * sinv[i];
          xh[2 * i + 1] = x0 * sinv[i] + x1 * cosv[i];
        }
      }
    } else {  // neox pairs (i, i + half)
      for (int64_t h = 0; h < n_head; ++h) {
        float* xh = x + (t * n_head + h) * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const float x0 = xh[i], x1 = xh[i + half];
          xh[i] = x0 * cosv[i] - x1 * sinv[i];
          xh[i + half] = x0 * sinv[i] + x1 * cosv[i];
        }
      }
    }
  }
}

}  // namespace troupe::kernels
