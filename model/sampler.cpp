// Sampler: penalties, temperature, top-k (heap selection, O(n_vocab log k)),
// top-p (a quickselect on probability mass, O(n_vocab) expected, no sort of
// the vocab), min-p, and a draw from a 64-bit Mersenne Twister seeded per
// request. Whole-vocab softmaxes go through the SIMD kernel.
#include "model/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Ranks candidates best first: higher logit, then lower id. A strict total
// order (NaN logits are mapped to -inf before they get here), so every
// selection below is deterministic.
bool better(const SampleCandidate& a, const SampleCandidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}

bool better_lp(const TokenLogprob& a, const TokenLogprob& b) {
  return a.logprob > b.logprob || (a.logprob == b.logprob && a.token < b.token);
}

// argmax, lowest id on ties; -1 when no logit is > -inf (all masked or NaN).
// A running max with its index compiles to a branchless chain (maxss, cmov)
// of ~8 cycles an element: 90 us for a 32K vocabulary, the largest serial
// part of a small model's decode step. Instead: independent lanes per block
// (they vectorize), the first block whose max beats all before it, then the
// first index in that block holding the max.
int32_t argmax(std::span<const float> logits) {
  constexpr size_t kLanes = 16, kBlock = 512;
  const float* x = logits.data();
  const size_t n = logits.size();
  float best_v = kNegInf;
  size_t best_block = n;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    float lane[kLanes];
    std::fill(lane, lane + kLanes, kNegInf);
    size_t i = b;
    for (; i + kLanes <= e; i += kLanes) {
      for (size_t j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];  // NaN never wins
    }
    for (; i < e; ++i) lane[0] = x[i] > lane[0] ? x[i] : lane[0];
    float m = lane[0];
    for (size_t j = 1; j < kLanes; ++j) m = lane[j] > m ? lane[j] : m;
    if (m > best_v) {
      best_v = m;
      best_block = b;
    }
  }
  if (best_block == n) return -1;
  for (size_t i = best_block;; ++i) {
    if (x[i] == best_v) return static_cast<int32_t>(i);
  }
}

[[noreturn]] void throw_no_finite() {
  throw Error(Errc::invalid_argument, "sampler: logits hold no finite value to sample from");
}

// The middle one of three by `better`.
const SampleCandidate& median3(const SampleCandidate& a, const SampleCandidate& b, const SampleCandidate& d) {
  if (better(a, b)) {
    if (better(b, d)) return b;
    return better(a, d) ? d : a;
  }
  if (better(a, d)) return a;
  return better(b, d) ? d : b;
}

// Reorders c so that c[0, keep) is the top-p set, returning keep: the best
// tokens (by `better`) up to and including the one whose cumulative mass
// reaches target. A quickselect that weighs each side by its mass instead of
// counting it, so the set is found in expected O(n) and left unsorted.
size_t top_p_prefix(std::span<SampleCandidate> c, double target) {
  size_t lo = 0;         // c[0, lo): certainly kept, total mass `acc`
  size_t hi = c.size();  // c[hi, n): certainly dropped
  double acc = 0.0;
  while (hi - lo > 32) {
    // Median of three as the pivot, then [better than pivot][pivot][worse].
    const SampleCandidate pivot = median3(c[lo], c[lo + (hi - lo) / 2], c[hi - 1]);
    auto first = c.begin() + static_cast<ptrdiff_t>(lo);
    auto last = c.begin() + static_cast<ptrdiff_t>(hi);
    auto mid_it = std::partition(first, last, [&](const SampleCandidate& x) { return better(x, pivot); });
    std::iter_swap(mid_it,
                   std::find_if(mid_it, last, [&](const SampleCandidate& x) { return x.token == pivot.token; }));
    const size_t mid = static_cast<size_t>(mid_it - c.begin());
    double upper = 0.0;
    for (size_t i = lo; i < mid; ++i) upper += c[i].prob;
    if (acc + upper >= target) {
      hi = mid;
    } else if (acc + upper + c[mid].prob >= target) {
      return mid + 1;
    } else {
      acc += upper + c[mid].prob;
      lo = mid + 1;
    }
  }
  std::sort(c.begin() + static_cast<ptrdiff_t>(lo), c.begin() + static_cast<ptrdiff_t>(hi), better);
  for (size_t i = lo; i < hi; ++i) {
    acc += c[i].prob;
    if (acc >= target) return i + 1;
  }
  return hi;  // rounding left the target just out of reach
}

// Scales p so it sums to 1 over what is left.
void renormalise(std::span<SampleCandidate> c) {
  double total = 0.0;
  for (const SampleCandidate& x : c) total += x.prob;
  for (SampleCandidate& x : c) x.prob = static_cast<float>(x.prob / total);
}

// Index of the draw u in [0, 1) over weights w(0..n-1): the first index
// whose cumulative weight passes u * total. Sums run over blocks with four
// partial sums (not one long dependency chain), and a block whose sum does
// not reach the target is skipped whole; over a 150k vocab that is most of
// them.
template <class Weight>
size_t draw(size_t n, double u, Weight w) {
  constexpr size_t kBlock = 256;
  auto block_sum = [&](size_t b, size_t e) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    size_t i = b;
    for (; i + 4 <= e; i += 4) {
      s0 += w(i);
      s1 += w(i + 1);
      s2 += w(i + 2);
      s3 += w(i + 3);
    }
    for (; i < e; ++i) s0 += w(i);
    return (s0 + s1) + (s2 + s3);
  };
  double total = 0.0;
  for (size_t b = 0; b < n; b += kBlock) total += block_sum(b, std::min(n, b + kBlock));
  const double target = u * total;
  double cum = 0.0;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    const double s = block_sum(b, e);
    if (cum + s <= target) {
      cum += s;
      continue;
    }
    for (size_t i = b; i < e; ++i) {
      cum += w(i);
      if (target < cum && w(i) > 0.0) return i;
    }
  }
  // Rounding left the target just past the end: take the last token that
  // has any weight (never one whose probability underflowed to 0).
  size_t last = n;
  while (last > 0 && !(w(last - 1) > 0.0)) --last;
  return last > 0 ? last - 1 : 0;
}

// A draw from the weights prob(0 .. n-1) (token_at(i) is the token of
// entry i). With a proposal (draft >= 0, proposed with certainty): the
// draft with its probability p, else a draw from the rest, renormalised,
// which is the residual max(0, p - q) of rejection sampling when q is 1 on
// the draft, so the token is distributed exactly as without a proposal.
template <class Prob, class TokenAt, class Uniform>
int32_t draw_token(size_t n, Prob prob, TokenAt token_at, int32_t draft, Uniform uniform) {
  const double u = uniform();
  if (draft < 0) return token_at(draw(n, u, prob));
  double p_draft = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (token_at(i) == draft) {
      p_draft = prob(i);
      break;
    }
  }
  if (u < p_draft) return draft;
  return token_at(draw(n, uniform(), [&](size_t i) { return token_at(i) == draft ? 0.0 : prob(i); }));
}

}  // namespace

void check_sampling(const SamplingParams& p) {
  // %g, so that a tiny value is shown as itself (1e-300 became 0 as a float)
  // instead of as "0.000000".
  auto fail = [](const char* param, const std::string& rule, double got) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", got);
    throw RequestError(Errc::invalid_argument, param, std::string(param) + " must be " + rule + ", got " + buf);
  };
  if (!(std::isfinite(p.temperature) && p.temperature >= 0.0f)) fail("temperature", ">= 0", p.temperature);
  if (p.top_k < 0) fail("top_k", ">= 0", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    fail("top_p", "in (0, 1] (as a 32-bit float: at least 1.4e-45)", p.top_p);
  }
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) fail("min_p", "in [0, 1]", p.min_p);
  if (!(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0f)) {
    fail("repetition_penalty", "> 0", p.repetition_penalty);
  }
  if (!std::isfinite(p.presence_penalty)) fail("presence_penalty", "finite", p.presence_penalty);
  if (!std::isfinite(p.frequency_penalty)) fail("frequency_penalty", "finite", p.frequency_penalty);
  if (p.penalty_last_n < -1) fail("repeat_last_n", ">= -1", p.penalty_last_n);
  if (p.n_logprobs < 0 || p.n_logprobs > 20) fail("top_logprobs", "in 0..20", p.n_logprobs);
  if (p.logit_bias.size() > kMaxLogitBias) {
    throw RequestError(Errc::invalid_argument, "logit_bias",
                       "logit_bias holds more than " + std::to_string(kMaxLogitBias) + " tokens");
  }
  for (const TokenBias& b : p.logit_bias) {
    if (!(b.bias >= -100.0f && b.bias <= 100.0f)) fail("logit_bias", "in [-100, 100] for every token", b.bias);
  }
}

Sampler::Sampler(const SamplingParams& p)
    : params_(p), rng_(p.seed), chosen_logprob_(std::numeric_limits<float>::quiet_NaN()) {
  check_sampling(p);
}

void Sampler::apply_bias(std::span<float> logits) {
  for (const TokenBias& b : params_.logit_bias) {
    if (b.token < 0 || static_cast<size_t>(b.token) >= logits.size()) {
      throw Error(Errc::invalid_argument, "sampler: logit_bias token " + std::to_string(b.token) +
                                              " is outside the vocab of " + std::to_string(logits.size()));
    }
    saved_.emplace_back(b.token, logits[b.token]);
    logits[b.token] += b.bias;
  }
}

// saved_ by token, each token once with its first (raw) value: bias
// entries come before the penalties' and a stable sort keeps them first.
static void settle_saved(std::vector<std::pair<int32_t, float>>& saved) {
  std::stable_sort(saved.begin(), saved.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  saved.erase(std::unique(saved.begin(), saved.end(), [](const auto& a, const auto& b) { return a.first == b.first; }),
              saved.end());
}

// Appends to saved_ (the caller clears it and settles it after).
void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> history) {
  const SamplingParams& p = params_;
  // llama.cpp's window (repeat_last_n): the latest tokens only, prompt ones
  // included, so a long prompt's old words stop weighing on the output.
  if (p.penalty_last_n >= 0) history = history.last(std::min(history.size(), static_cast<size_t>(p.penalty_last_n)));
  if (history.empty() || (p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f)) {
    return;
  }
  // Sorting a copy groups repeats into runs: one pass then gives each seen
  // token and its count, with no vocab-sized table.
  seen_.assign(history.begin(), history.end());
  std::sort(seen_.begin(), seen_.end());
  if (seen_.front() < 0 || static_cast<size_t>(seen_.back()) >= logits.size()) {
    const int32_t bad = seen_.front() < 0 ? seen_.front() : seen_.back();
    throw Error(Errc::invalid_argument, "sampler: history token " + std::to_string(bad) + " is outside the vocab of " +
                                            std::to_string(logits.size()));
  }
  for (size_t i = 0; i < seen_.size();) {
    size_t j = i;
    while (j < seen_.size() && seen_[j] == seen_[i]) ++j;
    const int32_t t = seen_[i];
    const float count = static_cast<float>(j - i);
    float l = logits[t];
    saved_.emplace_back(t, l);
    if (p.repetition_penalty != 1.0f) l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
    l -= p.presence_penalty + p.frequency_penalty * count;
    logits[t] = l;
    i = j;
  }
}

float Sampler::raw_logit(std::span<const float> logits, int32_t token) const {
  auto it = std::lower_bound(saved_.begin(), saved_.end(), token,
                             [](const std::pair<int32_t, float>& s, int32_t t) { return s.first < t; });
  return it != saved_.end() && it->first == token ? it->second : logits[token];
}

void Sampler::record_logprobs(std::span<const float> raw) {
  // log-sum-exp through the SIMD softmax: p[argmax] = 1 / sum exp(raw - max),
  // so log_norm = max - log(p[argmax]).
  const size_t n = raw.size();
  probs_.resize(n);
  for (size_t i = 0; i < n; ++i) probs_[i] = std::isnan(raw[i]) ? kNegInf : raw[i];
  const int32_t best = argmax(probs_);
  const float m = best < 0 ? kNegInf : probs_[static_cast<size_t>(best)];
  top_.clear();
  if (best < 0 || !std::isfinite(m)) {
    log_norm_ = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  kernels::softmax(probs_.data(), static_cast<int64_t>(n));
  log_norm_ = m - std::log(probs_[best]);

  // The n best by a bounded heap whose top is the worst kept entry.
  const size_t k = static_cast<size_t>(params_.n_logprobs);
  if (k == 0) return;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(raw[i])) continue;
    const TokenLogprob e{.token = static_cast<int32_t>(i), .logprob = raw[i]};
    if (top_.size() < k) {
      top_.push_back(e);
      std::push_heap(top_.begin(), top_.end(), better_lp);
    } else if (better_lp(e, top_.front())) {
      std::pop_heap(top_.begin(), top_.end(), better_lp);
      top_.back() = e;
      std::push_heap(top_.begin(), top_.end(), better_lp);
    }
  }
  std::sort_heap(top_.begin(), top_.end(), better_lp);
  for (TokenLogprob& e : top_) e.logprob -= log_norm_;
}

// top_k < n_vocab: the k best by a bounded heap (top = worst kept), sorted,
// then top_p by a scan and min_p, all over k tokens.
void Sampler::filter_top_k(std::span<const float> logits, float inv_t) {
  const SamplingParams& p = params_;
  const size_t k = static_cast<size_t>(p.top_k);
  cand_.clear();
  cand_.reserve(k);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = logits[i];
    const SampleCandidate c{.token = static_cast<int32_t>(i), .logit = std::isnan(v) ? kNegInf : v * inv_t};
    if (cand_.size() < k) {
      cand_.push_back(c);
      std::push_heap(cand_.begin(), cand_.end(), better);
    } else if (better(c, cand_.front())) {
      std::pop_heap(cand_.begin(), cand_.end(), better);
      cand_.back() = c;
      std::push_heap(cand_.begin(), cand_.end(), better);
    }
  }
  std::sort_heap(cand_.begin(), cand_.end(), better);
  const float max_l = cand_.front().logit;
  if (!std::isfinite(max_l)) throw_no_finite();
  for (SampleCandidate& c : cand_) c.prob = std::exp(c.logit - max_l);
  renormalise(cand_);
  if (p.top_p < 1.0f) {
    // Keep through the token whose cumulative mass reaches top_p (HF and
    // llama.cpp agree on keeping the crossing token).
    double cum = 0.0;
    for (size_t i = 0; i < cand_.size(); ++i) {
      cum += cand_[i].prob;
      if (cum >= p.top_p) {
        cand_.resize(i + 1);
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    const float floor = p.min_p * cand_.front().prob;
    std::erase_if(cand_, [&](const SampleCandidate& c) { return c.prob < floor; });
  }
  renormalise(cand_);
}

// Whole-vocab top_p and/or min_p over probs_ (already normalised). Tokens
// under min_p * p_max fail min_p; tokens under (1 - top_p) / n_vocab cannot be
// in the nucleus (every token ranked at or below one would then weigh less
// than 1 - top_p in all). Both are ranked below all survivors, so they are
// skipped before the candidates are even built.
void Sampler::filter_full(std::span<const float> logits, float inv_t, float min_prob) {
  const SamplingParams& p = params_;
  const size_t n = probs_.size();
  float floor = min_prob;
  if (p.top_p < 1.0f) floor = std::max(floor, (1.0f - p.top_p) / static_cast<float>(n));
  cand_.clear();
  for (size_t i = 0; i < n; ++i) {
    // A kept token has probability > 0, so its logit is a number.
    if (probs_[i] >= floor && probs_[i] > 0.0f) {
      cand_.push_back({.token = static_cast<int32_t>(i), .logit = logits[i] * inv_t, .prob = probs_[i]});
    }
  }
  if (p.top_p < 1.0f) cand_.resize(top_p_prefix(cand_, p.top_p));
  renormalise(cand_);
}

bool Sampler::filter(std::span<const float> logits) {
  const SamplingParams& p = params_;
  const size_t n = logits.size();
  const float inv_t = 1.0f / p.temperature;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    filter_top_k(logits, inv_t);
    return false;
  }
  probs_.resize(n);
  int32_t best = -1;
  float m = kNegInf;
  for (size_t i = 0; i < n; ++i) {
    const float v = std::isnan(logits[i]) ? kNegInf : logits[i] * inv_t;
    probs_[i] = v;
    if (v > m) {
      m = v;
      best = static_cast<int32_t>(i);
    }
  }
  if (best < 0 || !std::isfinite(m)) throw_no_finite();
  kernels::softmax(probs_.data(), static_cast<int64_t>(n));
  if (p.top_p >= 1.0f && p.min_p <= 0.0f) return true;
  filter_full(logits, inv_t, p.min_p * probs_[best]);
  return false;
}

std::span<const SampleCandidate> Sampler::candidates(std::span<float> logits, std::span<const int32_t> history) {
  if (logits.empty()) throw Error(Errc::invalid_argument, "sampler: empty logits");
  saved_.clear();
  apply_bias(logits);
  apply_penalties(logits, history);
  settle_saved(saved_);
  if (params_.temperature == 0.0f) {
    const int32_t best = argmax(logits);
    if (best < 0) throw_no_finite();
    cand_.assign(1, SampleCandidate{.token = best, .logit = logits[best], .prob = 1.0f});
    return cand_;
  }
  if (filter(logits)) {
    const float inv_t = 1.0f / params_.temperature;
    cand_.clear();
    for (size_t i = 0; i < probs_.size(); ++i) {
      const float l = std::isnan(logits[i]) ? kNegInf : logits[i] * inv_t;
      cand_.push_back({.token = static_cast<int32_t>(i), .logit = l, .prob = probs_[i]});
    }
  }
  std::sort(cand_.begin(), cand_.end(), better);
  return cand_;
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history, TokenConstraint* constraint) {
  return choose(logits, history, -1, constraint);
}

int32_t Sampler::verify(std::span<float> logits, std::span<const int32_t> history, int32_t draft,
                        TokenConstraint* constraint) {
  if (draft < 0 || static_cast<size_t>(draft) >= logits.size()) {
    throw Error(Errc::invalid_argument, "sampler: proposed token " + std::to_string(draft) + " outside the vocabulary");
  }
  return choose(logits, history, draft, constraint);
}

double Sampler::uniform() {
  // u in [0, 1) from the top 53 bits: the same on every platform, unlike
  // std::uniform_real_distribution.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int32_t Sampler::choose(std::span<float> logits, std::span<const int32_t> history, int32_t draft,
                        TokenConstraint* constraint) {
  if (logits.empty()) throw Error(Errc::invalid_argument, "sampler: empty logits");
  const bool want_logprobs = params_.logprobs || params_.n_logprobs > 0;
  if (want_logprobs) record_logprobs(logits);
  saved_.clear();
  apply_bias(logits);
  apply_penalties(logits, history);
  settle_saved(saved_);
  auto refused_all = [] {
    return Error(Errc::invalid_argument, "the output format allows no token of the vocabulary here");
  };

  int32_t token = -1;
  if (params_.temperature == 0.0f) {
    token = argmax(logits);  // a proposal is accepted exactly when it is this
    if (token < 0) throw_no_finite();
    // The argmax of the allowed tokens is the argmax itself when allowed:
    // the whole-vocab mask is needed only when it is refused.
    if (constraint != nullptr && !constraint->allows(token)) {
      constraint->mask(logits);
      token = argmax(logits);
      if (token < 0) throw refused_all();
    }
  } else if (constraint != nullptr && (constraint->mask(logits), argmax(logits) < 0)) {
    throw refused_all();
  } else if (filter(logits)) {
    token = draw_token(
        probs_.size(), [&](size_t i) { return double(probs_[i]); }, [](size_t i) { return static_cast<int32_t>(i); },
        draft, [&] { return uniform(); });
  } else {
    token = draw_token(
        cand_.size(), [&](size_t i) { return double(cand_[i].prob); }, [&](size_t i) { return cand_[i].token; },
        draft, [&] { return uniform(); });
  }
  chosen_logprob_ = want_logprobs ? raw_logit(logits, token) - log_norm_ : std::numeric_limits<float>::quiet_NaN();
  return token;
}

void Sampler::score(std::span<const float> logits, int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= logits.size()) {
    throw Error(Errc::invalid_argument, "sampler: token " + std::to_string(token) + " outside the vocabulary");
  }
  saved_.clear();  // no penalties: raw_logit reads the logits as given
  record_logprobs(logits);
  chosen_logprob_ = logits[static_cast<size_t>(token)] - log_norm_;
}

}  // namespace troupe
