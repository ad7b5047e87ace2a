// Sampler actor: SeqOpen builds a request's Sampler (and, for a
// constrained output, its token grammar over the vocabulary trie, built
// on the first such request), StepLogits samples, verifies proposed tokens
// or scores prompt tokens row by row (an embedding request's rows are
// pooled instead), SeqClose forgets. Rows of requests it does not know
// (cancelled while the step ran) are answered "finished, no token".
#include "actors/sampler_actor.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <optional>
#include <unordered_map>

#include "actors/actor_meter.hpp"
#include "grammar/thinking_budget.hpp"
#include "grammar/token_grammar.hpp"
#include "model/pooling.hpp"
#include "model/sampler.hpp"
#include "model/vocab_trie.hpp"

namespace troupe {
namespace {

struct SamplerState {
  struct Seq {
    Seq(const SeqOpen& open, std::unique_ptr<TokenConstraint> g)
        : sampler(open.params.sampling),
          constraint(std::move(g)),
          formatted(open.params.format.constrained()),
          history(open.prompt),
          n_prompt(static_cast<int32_t>(open.prompt.size())),
          ignore_eos(open.params.ignore_eos),
          logprobs(open.params.sampling.logprobs || open.params.sampling.n_logprobs > 0),
          score_prompt(open.params.prompt_logprobs) {
      const EmbedParams& e = open.params.embed;
      if (e.on) pooler.emplace(e.pooling, e.normalize != 0, e.dimensions, n_prompt);
    }
    Sampler sampler;
    std::unique_ptr<TokenConstraint> constraint;  // the output format's and the thinking budget; null: neither
    bool formatted;                               // an output format: its document's end ends the request
    std::vector<int32_t> history;  // prompt + generated
    int32_t n_prompt = 0;
    int32_t scored = 0;  // prompt tokens 1 .. scored - 1 were scored (recomputed rows are not again)
    bool ignore_eos;
    bool logprobs;
    bool score_prompt;
    std::optional<EmbeddingPooler> pooler;  // an embedding request: its rows are hidden states
  };
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<const grammar::TokenTrie> trie;  // built on the first constrained request
  // Masks by grammar (compiled grammars are shared by schema text), so
  // requests with one schema share their walks. Dropped when many.
  struct GrammarMasks {
    std::shared_ptr<const grammar::Grammar> grammar;  // keeps the key's address unique
    std::shared_ptr<grammar::MaskCache> masks;
  };
  static constexpr size_t kMaxGrammars = 32;
  std::unordered_map<const grammar::Grammar*, GrammarMasks> masks;
  std::unordered_map<RequestId, Seq> seqs;

  std::unique_ptr<TokenConstraint> constraint_for(const OutputFormat& format) {
    if (!format.constrained()) return nullptr;
    if (!trie) trie = vocab_trie(*tokenizer);
    std::shared_ptr<const grammar::Grammar> g = output_grammar(format);
    auto it = masks.find(g.get());
    if (it == masks.end()) {
      if (masks.size() >= kMaxGrammars) masks.clear();
      it = masks.emplace(g.get(), GrammarMasks{g, std::make_shared<grammar::MaskCache>()}).first;
    }
    return token_constraint(format, trie, it->second.masks);
  }

  // The thinking budget's closing text, read once from the vocabulary.
  std::vector<int32_t> closer;
  grammar::ThinkTags tags;

  int32_t special_tag(std::string_view tag) const {
    const std::vector<int32_t> ids = tokenizer->encode(tag, /*add_special=*/false, /*parse_special=*/true);
    return ids.size() == 1 && tokenizer->is_special(ids[0]) ? ids[0] : -1;
  }

  std::unique_ptr<TokenConstraint> constraint_for(const SeqOpen& open) {
    std::unique_ptr<TokenConstraint> format = constraint_for(open.params.format);
    const int32_t budget = open.params.thinking_budget;
    if (budget < 0) return format;
    if (!trie) trie = vocab_trie(*tokenizer);
    if (closer.empty()) {
      closer = tokenizer->encode("\n</think>\n\n", /*add_special=*/false, /*parse_special=*/true);
      tags = {.open = special_tag("<think>"), .close = special_tag("</think>")};
    }
    return std::make_unique<grammar::ThinkingBudget>(budget, closer, trie, tags, open.prompt, std::move(format));
  }
};

void fail_row(SampledToken& out, Errc code, std::string message) {
  out.status = SampleStatus::failed;
  out.error_code = code;
  out.error = std::move(message);
}

void record_logprobs(const Sampler& sampler, SampledToken& out) {
  out.logprob = sampler.chosen_logprob();
  const std::span<const TokenLogprob> top = sampler.top_logprobs();
  out.top_logprobs.assign(top.begin(), top.end());
}

// One logits row of a sequence. The row follows the token at `pos`; what it
// is for follows from the history: a known next token (a prompt token to
// score, or a recomputed position), or the next new token, which is
// sampled, or verified against the proposal fed after it (`next`).
// `closed`: an earlier row of this step ended the sequence's step (a
// rejected proposal, an end token): later rows are unused.
void sample_row(SamplerState::Seq& seq, const Tokenizer& tokenizer, std::span<float> logits, int32_t pos,
                int32_t next, bool& closed, SampledToken& out) {
  if (seq.pooler) {
    // An embedding pipeline's rows are the final hidden states; the prompt's
    // last one completes the request.
    if (closed || pos >= seq.n_prompt || !seq.pooler->add(logits, pos)) {
      out.status = SampleStatus::unused;
      return;
    }
    out.status = SampleStatus::embedded;
    out.embedding = seq.pooler->result();
    out.finished = true;
    closed = true;
    return;
  }
  const auto n_hist = static_cast<int32_t>(seq.history.size());
  if (closed || pos + 1 > n_hist) {
    out.status = SampleStatus::unused;
    return;
  }
  if (pos + 1 < n_hist) {
    const int32_t known = pos + 1;
    if (!seq.score_prompt || known >= seq.n_prompt || known < seq.scored) {
      out.status = SampleStatus::unused;
      return;
    }
    seq.sampler.score(logits, seq.history[static_cast<size_t>(known)]);
    seq.scored = known + 1;
    out.status = SampleStatus::scored;
    out.token = seq.history[static_cast<size_t>(known)];
    record_logprobs(seq.sampler, out);
    return;
  }
  TokenConstraint* g = seq.constraint.get();
  const int32_t token =
      next >= 0 ? seq.sampler.verify(logits, seq.history, next, g) : seq.sampler.sample(logits, seq.history, g);
  seq.history.push_back(token);
  out.status = SampleStatus::token;
  out.token = token;
  out.finished = !seq.ignore_eos && tokenizer.is_eog(token);
  if (g != nullptr) {
    g->accept(token);
    // A constrained output ends with its document: at an end token the
    // grammar allowed, or when nothing may follow.
    if (seq.formatted) out.finished = out.finished || tokenizer.is_eog(token) || g->done();
  }
  if (seq.logprobs) record_logprobs(seq.sampler, out);
  closed = out.finished || (next >= 0 && token != next) || next < 0;
}

class SamplerImpl : public sampler_actor::base {
 public:
  SamplerImpl(caf::actor_config& cfg, std::shared_ptr<const Tokenizer> tokenizer) : sampler_actor::base(cfg) {
    state_.tokenizer = std::move(tokenizer);
  }

  behavior_type make_behavior() override {
    return {
        [this](SeqOpen& open) {
          // Parameters were validated by the scheduler; a Sampler that still
          // refuses them leaves the request unknown, so its rows end it.
          try {
            state_.seqs.erase(open.id);
            state_.seqs.try_emplace(open.id, open, state_.constraint_for(open));
          } catch (const std::exception&) {
            state_.seqs.erase(open.id);
          }
        },
        [this](SeqClose& close) { state_.seqs.erase(close.id); },
        [this](StepLogits& in) -> SampledStep {
          SampledStep out{.step = in.step, .engine = in.engine, .compute_ns = in.compute_ns};
          const size_t n_rows = in.rows.size();
          out.tokens.resize(n_rows);
          const bool shaped = in.logits && in.logits->rows == static_cast<int64_t>(n_rows) &&
                              in.positions.size() == n_rows && in.next_fed.size() == n_rows;
          bool closed = false;
          for (size_t i = 0; i < n_rows; ++i) {
            SampledToken& t = out.tokens[i];
            t.id = in.rows[i];
            if (i == 0 || in.rows[i - 1] != t.id) closed = false;  // a new sequence's rows
            if (!shaped) {
              fail_row(t, Errc::internal, "logits of step " + std::to_string(in.step) + " do not match its rows");
              continue;
            }
            const auto it = state_.seqs.find(t.id);
            if (it == state_.seqs.end()) {
              t.status = SampleStatus::skipped;
              continue;
            }
            try {
              const std::span<float> logits(in.logits->row(static_cast<int64_t>(i)),
                                            static_cast<size_t>(in.logits->cols));
              sample_row(it->second, *state_.tokenizer, logits, in.positions[i], in.next_fed[i], closed, t);
            } catch (const Error& e) {
              fail_row(t, e.code(), std::string("sampling failed: ") + e.what());
              closed = true;
            } catch (const std::exception& e) {
              fail_row(t, Errc::internal, std::string("sampling failed: ") + e.what());
              closed = true;
            }
          }
          in.logits = nullptr;  // back to the last stage's pool before the reply travels
          return out;
        },
    };
  }

 private:
  SamplerState state_;
};

}  // namespace

sampler_actor spawn_sampler(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                            SamplerActorOptions options) {
  if (options.meter) {
    if (options.detached) {
      return system.spawn<Metered<SamplerImpl>, caf::detached>(std::move(options.meter), std::move(tokenizer));
    }
    return system.spawn<Metered<SamplerImpl>>(std::move(options.meter), std::move(tokenizer));
  }
  if (options.detached) return system.spawn<SamplerImpl, caf::detached>(std::move(tokenizer));
  return system.spawn<SamplerImpl>(std::move(tokenizer));
}

}  // namespace troupe
