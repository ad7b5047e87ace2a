// DraftProposer: per step, every speculating sequence's unseen tokens (its
// prompt the first time, then the target's accepted tokens and correction)
// and then its proposals, one draft token per round, all sequences batched
// in each forward of the draft stage.
#include "model/draft_proposer.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace troupe {
namespace {

StageOptions draft_stage(const Model& model, const DraftOptions& o) {
  const int64_t n_layer = model.config().n_layer;
  const int64_t layers = o.n_layers < 0 ? n_layer : o.n_layers;
  if (layers < 1 || layers > n_layer) {
    throw Error(Errc::invalid_argument, "draft layers must be in [1, " + std::to_string(n_layer) + "], got " +
                                            std::to_string(layers));
  }
  if (model.config().has_recurrent_layers()) {
    throw Error(Errc::unsupported, "a draft model with recurrent (linear-attention) layers cannot roll back "
                                   "rejected proposals; use a draft model of attention layers only");
  }
  return {.first_layer = 0,
          .last_layer = layers,
          .max_tokens = o.max_tokens,
          .max_seqs = o.max_seqs,
          .n_kv_blocks = o.n_kv_blocks,
          .kv_block_size = o.kv_block_size,
          .early_exit = layers < n_layer};
}

int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

}  // namespace

DraftProposer::DraftProposer(std::shared_ptr<const Model> model, Backend& backend, DraftOptions options)
    : stage_(model, backend, draft_stage(*model, options)),
      self_(options.n_layers >= 0 && options.n_layers < model->config().n_layer),
      cost_(options.cost_per_token),
      block_size_(options.kv_block_size) {
  free_.reserve(static_cast<size_t>(options.n_kv_blocks));
  for (int64_t b = options.n_kv_blocks; b-- > 0;) free_.push_back(static_cast<int32_t>(b));
}

int32_t DraftProposer::n_cached(int64_t id) const {
  const auto it = seqs_.find(id);
  return it == seqs_.end() ? 0 : static_cast<int32_t>(it->second.cached.size());
}

void DraftProposer::forget(int64_t id) {
  const auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  shrink(it->second, 0);
  seqs_.erase(it);
}

void DraftProposer::shrink(Seq& s, int64_t n_tokens) {
  if (static_cast<int64_t>(s.cached.size()) > n_tokens) s.cached.resize(static_cast<size_t>(n_tokens));
  const auto keep = static_cast<size_t>((n_tokens + block_size_ - 1) / block_size_);
  while (s.blocks.size() > keep) {
    free_.push_back(s.blocks.back());
    s.blocks.pop_back();
  }
}

bool DraftProposer::ensure_blocks(Seq& s, int64_t n, const std::vector<const Seq*>& busy) {
  const auto need = static_cast<size_t>((n + block_size_ - 1) / block_size_);
  while (s.blocks.size() < need) {
    if (free_.empty()) {
      // The longest idle sequence gives its pages back (it recomputes its
      // prompt if it speculates again).
      Seq* victim = nullptr;
      for (auto& [id, v] : seqs_) {
        if (v.blocks.empty() || std::find(busy.begin(), busy.end(), &v) != busy.end()) continue;
        if (victim == nullptr || v.last_use < victim->last_use) victim = &v;
      }
      if (victim == nullptr) return false;
      shrink(*victim, 0);
    }
    s.blocks.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void DraftProposer::step(std::vector<Feed*>& feeds, std::vector<std::vector<int32_t>>& out,
                         const std::vector<int32_t>& k_of) {
  const StageOptions& o = stage_.options();
  tokens_.clear();
  batch_.clear();
  std::vector<std::pair<Feed*, int32_t>> ran;  // each feed and the tokens it runs now
  int64_t budget = o.max_tokens;
  for (Feed* f : feeds) {
    if (f->pending.empty() || budget == 0 || static_cast<int64_t>(batch_.size()) == o.max_seqs) continue;
    const auto n = static_cast<int32_t>(std::min<int64_t>(static_cast<int64_t>(f->pending.size()), budget));
    budget -= n;
    tokens_.insert(tokens_.end(), f->pending.begin(), f->pending.begin() + n);
    batch_.push_back({.n_tokens = n,
                      .n_past = static_cast<int32_t>(f->seq->cached.size()),
                      .block_table = f->seq->blocks,
                      .n_logits = n == static_cast<int32_t>(f->pending.size()) ? 1 : 0});
    ran.emplace_back(f, n);
  }
  if (batch_.empty()) return;
  const BatchView view{.tokens = tokens_, .seqs = batch_};
  const int64_t n_vocab = stage_.model().config().n_vocab;
  logits_.resize(static_cast<size_t>(view.n_logit_rows() * n_vocab));
  stage_.forward(view, nullptr, logits_.data());
  int64_t row = 0;
  for (const auto& [f, n] : ran) {
    const bool last = n == static_cast<int32_t>(f->pending.size());
    f->seq->cached.insert(f->seq->cached.end(), f->pending.begin(), f->pending.begin() + n);
    f->pending.erase(f->pending.begin(), f->pending.begin() + n);
    if (!last) continue;
    const int32_t token = argmax(logits_.data() + row++ * n_vocab, n_vocab);
    std::vector<int32_t>& got = out[f->query];
    got.push_back(token);
    // The next round runs this proposal to get the one after it.
    if (static_cast<int32_t>(got.size()) < k_of[f->query]) f->pending.push_back(token);
  }
}

void DraftProposer::propose(std::span<const ProposalQuery> queries, std::vector<std::vector<int32_t>>& out) {
  out.assign(queries.size(), {});
  ++clock_;
  std::vector<Feed> feeds;
  feeds.reserve(queries.size());
  std::vector<const Seq*> busy;
  std::vector<int32_t> k_of(queries.size(), 0);
  const int64_t n_vocab = stage_.model().config().n_vocab;
  for (size_t i = 0; i < queries.size(); ++i) {
    const ProposalQuery& q = queries[i];
    if (q.k <= 0 || q.tokens.empty()) continue;
    // A token the draft's vocabulary lacks (a target with a larger one):
    // no proposals for this sequence.
    if (std::any_of(q.tokens.begin(), q.tokens.end(), [&](int32_t t) { return t < 0 || t >= n_vocab; })) continue;
    Seq& s = seqs_[q.id];
    s.last_use = clock_;
    busy.push_back(&s);
    // Roll back to the prefix shared with the query, keeping at least one
    // token to run: its logits give the first proposal.
    const auto mismatch = std::mismatch(s.cached.begin(), s.cached.end(), q.tokens.begin(), q.tokens.end());
    const auto common = std::min<size_t>(static_cast<size_t>(mismatch.first - s.cached.begin()), q.tokens.size() - 1);
    shrink(s, static_cast<int64_t>(common));
    // The query's tokens and every proposal but the last get draft KV.
    if (!ensure_blocks(s, static_cast<int64_t>(q.tokens.size()) + q.k - 1, busy)) continue;
    k_of[i] = q.k;
    feeds.push_back({.seq = &s, .query = i, .pending = {q.tokens.begin() + static_cast<ptrdiff_t>(common), q.tokens.end()}});
  }
  std::vector<Feed*> active;
  for (Feed& f : feeds) active.push_back(&f);
  while (std::any_of(active.begin(), active.end(), [](const Feed* f) { return !f->pending.empty(); })) {
    step(active, out, k_of);
  }
}

}  // namespace troupe
