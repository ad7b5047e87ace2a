// make_draft_proposer: the draft's model (loaded, or the target itself for
// self-speculation), a vocabulary check, and a backend that lives as long
// as the proposer.
#include "actors/draft_setup.hpp"

#include <string>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/draft_proposer.hpp"

namespace troupe {
namespace {

// A DraftProposer with the backend it computes on (declared first: the
// proposer's stage returns its memory to it on destruction).
class OwnedDraft : public Proposer {
 public:
  OwnedDraft(std::shared_ptr<const Model> model, int threads, DraftOptions options)
      : backend_(CpuBackendOptions{.n_threads = threads}), draft_(std::move(model), backend_, options) {}
  const char* name() const override { return draft_.name(); }
  void propose(std::span<const ProposalQuery> queries, std::vector<std::vector<int32_t>>& out) override {
    draft_.propose(queries, out);
  }
  void forget(int64_t id) override { draft_.forget(id); }
  double cost_per_token() const override { return draft_.cost_per_token(); }

 private:
  CpuBackend backend_;
  DraftProposer draft_;
};

void require_same_vocab(const Model& target, const Model& draft) {
  const VocabData& a = target.vocab();
  const VocabData& b = draft.vocab();
  if (target.config().n_vocab != draft.config().n_vocab || a.tokens != b.tokens) {
    throw Error(Errc::invalid_argument,
                "the draft model's vocabulary (" + std::to_string(draft.config().n_vocab) +
                    " tokens) is not the target's (" + std::to_string(target.config().n_vocab) +
                    " tokens): proposed ids would mean other tokens");
  }
}

// Weight bytes a token's forward reads in layers [0, last) and the output
// head (every proposal goes through the head; the embedding is a row).
double weight_bytes(const Model& m, int64_t last) {
  auto bytes_of = [](const Weight& w) {
    return w.data == nullptr ? 0.0 : static_cast<double>(w.n_out) * static_cast<double>(row_bytes(w.type, w.n_in));
  };
  double bytes = bytes_of(m.weights().output);
  visit_stage_matrices(m, 0, last, [&](const std::string& name, const Weight& w) {
    if (name != "token_embd" && name != "position_embd" && name != "output") bytes += bytes_of(w);
  });
  return bytes;
}

}  // namespace

std::shared_ptr<Proposer> make_draft_proposer(const PipelineConfig& config, const std::shared_ptr<const Model>& target,
                                              int32_t n_kv_blocks, int threads) {
  if (config.scheduler.spec_max_draft <= 0) return nullptr;
  const bool draft = config.draft_model || !config.draft_model_path.empty();
  if (draft && config.draft_layers > 0) {
    throw Error(Errc::invalid_argument, "PipelineConfig: give a draft model or draft_layers (self-speculation), not both");
  }
  if (!draft && config.draft_layers <= 0) return nullptr;  // prompt lookup
  DraftOptions options{.n_kv_blocks = n_kv_blocks,
                       .max_tokens = config.scheduler.max_tokens_per_step,
                       .max_seqs = config.scheduler.max_batch_size};
  const int n_threads = config.draft_threads > 0 ? config.draft_threads : threads;
  if (!draft) {
    const int64_t n_layer = target->config().n_layer;
    if (config.draft_layers >= n_layer) {
      throw Error(Errc::invalid_argument, "PipelineConfig: draft_layers must be below the model's " +
                                              std::to_string(n_layer) + " layers, got " +
                                              std::to_string(config.draft_layers));
    }
    options.n_layers = config.draft_layers;
    options.cost_per_token = weight_bytes(*target, config.draft_layers) / weight_bytes(*target, n_layer);
    return std::make_shared<OwnedDraft>(target, n_threads, options);
  }
  std::shared_ptr<const Model> model = config.draft_model ? config.draft_model : Model::load(config.draft_model_path);
  require_same_vocab(*target, *model);
  options.cost_per_token =
      weight_bytes(*model, model->config().n_layer) / weight_bytes(*target, target->config().n_layer);
  return std::make_shared<OwnedDraft>(std::move(model), n_threads, options);
}

}  // namespace troupe
