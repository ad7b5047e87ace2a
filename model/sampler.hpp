// Picks the next token from a row of logits: penalties on the history,
// temperature, top-k / top-p / min-p filters, then a seeded draw; reports
// OpenAI-style logprobs. Built for n_vocab up to ~150k: only the candidates a
// filter needs are ever sorted.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "grammar/token_constraint.hpp"

namespace troupe {

// OpenAI's logit_bias: added to a token's logit before sampling.
struct TokenBias {
  int32_t token = 0;
  float bias = 0.0f;  // in [-100, 100]
};

struct SamplingParams {
  float temperature = 1.0f;         // 0: greedy (lowest id on ties)
  int32_t top_k = 0;                // keep the k most likely tokens; 0: off
  float top_p = 1.0f;               // keep the smallest best-first set with mass >= top_p; 1: off
  float min_p = 0.0f;               // keep tokens with p >= min_p * p_max; 0: off
  float repetition_penalty = 1.0f;  // seen tokens: logit > 0 ? logit / r : logit * r; 1: off
  float presence_penalty = 0.0f;    // seen tokens: logit -= presence  (OpenAI)
  float frequency_penalty = 0.0f;   // seen tokens: logit -= frequency * count  (OpenAI)
  int32_t penalty_last_n = -1;      // the penalties see the last n tokens of the history; -1: all; 0: none
  uint64_t seed = 0;
  int32_t n_logprobs = 0;  // alternatives reported by top_logprobs(), 0..20
  bool logprobs = false;   // report the chosen token's logprob (implied by n_logprobs > 0)
  std::vector<TokenBias> logit_bias;  // at most kMaxLogitBias entries; a token given twice adds both
};

constexpr size_t kMaxLogitBias = 1024;

// Throws RequestError(invalid_argument) naming the parameter (as the
// OpenAI API calls it) that is out of range. The one check of these rules:
// the API parser, the engine and Sampler all call it. (logit_bias token
// ids need the vocabulary: check_generate_params checks them.)
void check_sampling(const SamplingParams& params);

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

// A token the filters leave possible, with its probability in the final
// (renormalised) distribution the draw uses.
struct SampleCandidate {
  int32_t token = 0;
  float logit = 0.0f;  // after penalties and temperature
  float prob = 0.0f;
};

// Order of operations (that of Hugging Face's and vLLM's samplers):
//   0. logit_bias;
//   1. repetition, presence, frequency penalties over every token in history
//      (the caller chooses how much history to pass);
//   1b. an output constraint (a grammar): tokens it refuses drop to -inf;
//      greedy checks the argmax first and masks only when it is refused;
//   2. temperature 0 -> argmax, done;
//   3. logits / temperature; top_k; top_p over the top-k set; min_p relative
//      to the most likely token; a draw from what is left.
// Logprobs are the log-softmax of the raw logits, before step 1, as the
// OpenAI API reports them.
class Sampler {
 public:
  // Throws check_sampling's RequestError for out-of-range parameters.
  explicit Sampler(const SamplingParams& params);

  // Returns the chosen token id. logits: [n_vocab], modified in place (the
  // penalties). history: earlier tokens of the sequence, each in [0, n_vocab).
  // constraint: the tokens it refuses are never chosen; when it refuses
  // every token, throws Error(invalid_argument) saying so.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history, TokenConstraint* constraint = nullptr);

  // Steps 1-3 without the draw: the tokens sample() could return and their
  // probabilities, most likely first; greedy gives one token with prob 1.
  // Valid until the next call. Does not touch the random stream.
  std::span<const SampleCandidate> candidates(std::span<float> logits, std::span<const int32_t> history);

  // Speculative decoding's check of a proposed token, for a proposer that
  // proposes one token with certainty (prompt lookup): accepts `draft` with
  // the probability sample() would give it, else draws from that
  // distribution with `draft` taken out. This is the rejection-sampling
  // rule, so the result is distributed exactly as sample()'s; greedy gives
  // the argmax either way. Returns the token (== draft when accepted);
  // logprobs as sample(). Throws Error(invalid_argument) for a draft outside
  // the vocabulary.
  int32_t verify(std::span<float> logits, std::span<const int32_t> history, int32_t draft,
                 TokenConstraint* constraint = nullptr);

  // Prompt logprobs: records `token`'s logprob and the n_logprobs best
  // alternatives (chosen_logprob(), top_logprobs()) without drawing.
  void score(std::span<const float> logits, int32_t token);

  // From the last sample() / verify() / score(), when params.logprobs or n_logprobs > 0 (else NaN
  // and empty): the chosen token's logprob and the n_logprobs most likely
  // tokens, best first (ties: lower id first).
  float chosen_logprob() const { return chosen_logprob_; }
  std::span<const TokenLogprob> top_logprobs() const { return top_; }

  const SamplingParams& params() const { return params_; }

 private:
  // sample() (draft -1) and verify(): penalties, filters, the draw.
  int32_t choose(std::span<float> logits, std::span<const int32_t> history, int32_t draft, TokenConstraint* constraint);
  void apply_bias(std::span<float> logits);
  double uniform();  // the next draw in [0, 1)
  void apply_penalties(std::span<float> logits, std::span<const int32_t> history);
  // Returns true when the draw is over the whole vocab (probs_), false when
  // over the filtered cand_.
  bool filter(std::span<const float> logits);
  void filter_top_k(std::span<const float> logits, float inv_t);
  void filter_full(std::span<const float> logits, float inv_t, float min_prob);
  void record_logprobs(std::span<const float> raw);
  float raw_logit(std::span<const float> logits, int32_t token) const;

  SamplingParams params_;
  std::mt19937_64 rng_;
  // Scratch reused across calls, so a steady decode allocates nothing.
  std::vector<float> probs_;                      // [n_vocab] softmax of logits / temperature
  std::vector<SampleCandidate> cand_;             // tokens still possible
  std::vector<int32_t> seen_;                     // sorted copy of the history
  std::vector<std::pair<int32_t, float>> saved_;  // (token, raw logit) of penalised or biased tokens, by token
  std::vector<TokenLogprob> top_;
  float log_norm_ = 0.0f;  // log-sum-exp of the raw logits
  float chosen_logprob_;
};

}  // namespace troupe
