// Generator: prefill in chunks, then one token per step, on a private KV
// pool whose blocks are simply 0..n-1 in order.
#include "model/generator.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.hpp"

namespace troupe {
namespace {
// The context: as asked, else the model's trained one capped at 4096.
int64_t context_length(const ModelConfig& c, const GeneratorOptions& options) {
  return options.n_ctx > 0 ? options.n_ctx : std::min<int64_t>(c.n_ctx_train > 0 ? c.n_ctx_train : 2048, 4096);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Generator::Generator(std::shared_ptr<const Model> model, Backend& backend, GeneratorOptions options)
    : Generator(std::move(model), std::vector<GeneratorStage>{{.backend = &backend}}, options) {}

StageOptions Generator::stage_limits(const ModelConfig& c, const GeneratorOptions& options) {
  const int64_t n_ctx = context_length(c, options);
  // One sequence whose blocks are 0..n-1: the pool holds exactly the context.
  return {.max_tokens = std::max<int64_t>(1, std::min(options.prefill_chunk, n_ctx)),
          .max_seqs = 1,
          .n_kv_blocks = (n_ctx + options.kv_block_size - 1) / options.kv_block_size,
          .kv_block_size = options.kv_block_size,
          .kv_type = options.kv_type};
}

Generator::Generator(std::shared_ptr<const Model> model, std::vector<GeneratorStage> stages, GeneratorOptions options)
    : model_(std::move(model)) {
  const ModelConfig& c = model_->config();
  const StageOptions limits = stage_limits(c, options);
  n_ctx_ = context_length(c, options);
  chunk_ = limits.max_tokens;
  const int64_t n_blocks = limits.n_kv_blocks;
  block_table_.resize(static_cast<size_t>(n_blocks));
  std::iota(block_table_.begin(), block_table_.end(), 0);
  if (stages.empty()) throw Error(Errc::invalid_argument, "Generator: no stages");
  int64_t expect = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const GeneratorStage& g = stages[i];
    const int64_t last = g.last_layer < 0 ? c.n_layer : g.last_layer;
    if (g.backend == nullptr || g.first_layer != expect) {
      throw Error(Errc::invalid_argument, "Generator: stages must cover the layers in order, each with a backend");
    }
    Link link;
    StageOptions o = limits;
    o.first_layer = g.first_layer;
    o.last_layer = last;
    link.stage = std::make_unique<ModelStage>(model_, *g.backend, o);
    if (i + 1 < stages.size()) {
      // The device side of the boundary provides the buffer, so it is pinned.
      Backend* next = stages[i + 1].backend;
      link.out_memory = next != nullptr && next->name() != "cpu" ? next : g.backend;
      link.out = static_cast<float*>(link.out_memory->host_alloc(static_cast<size_t>(chunk_ * c.n_embd) * sizeof(float)));
    }
    links_.push_back(std::move(link));
    expect = last;
  }
  if (expect != c.n_layer) throw Error(Errc::invalid_argument, "Generator: the stages do not reach the last layer");
  logits_.resize(static_cast<size_t>(c.n_vocab));
}

Generator::~Generator() {
  for (Link& l : links_) {
    if (l.out != nullptr) l.out_memory->host_free(l.out);
  }
}

void Generator::step(std::span<const int32_t> tokens, int32_t n_past, bool want_logits) {
  const BatchSeq seq{.n_tokens = static_cast<int32_t>(tokens.size()),
                     .n_past = n_past,
                     .block_table = block_table_,
                     .n_logits = want_logits ? 1 : 0,
                     .state_slot = 0};  // the one sequence's recurrent state, if the model keeps one
  const BatchView view{.tokens = tokens, .seqs = std::span(&seq, 1)};
  const float* hidden = nullptr;
  for (Link& l : links_) {
    l.stage->forward(view, hidden, l.out != nullptr ? l.out : logits_.data());
    hidden = l.out;
  }
}

std::vector<float> Generator::prompt_logits(std::span<const int32_t> prompt) {
  if (prompt.empty()) throw Error(Errc::invalid_argument, "empty prompt");
  if (static_cast<int64_t>(prompt.size()) > n_ctx_) throw Error(Errc::invalid_argument, "prompt longer than the context");
  for (size_t i = 0; i < prompt.size(); i += static_cast<size_t>(chunk_)) {
    const size_t n = std::min(prompt.size() - i, static_cast<size_t>(chunk_));
    step(prompt.subspan(i, n), static_cast<int32_t>(i), i + n == prompt.size());
  }
  return logits_;
}

std::vector<double> Generator::token_logprobs(std::span<const int32_t> tokens) {
  if (tokens.size() < 2) throw Error(Errc::invalid_argument, "token_logprobs needs at least 2 tokens");
  if (static_cast<int64_t>(tokens.size()) > n_ctx_) {
    throw Error(Errc::invalid_argument, std::to_string(tokens.size()) + " tokens do not fit a context of " +
                                            std::to_string(n_ctx_));
  }
  std::vector<double> out;
  out.reserve(tokens.size() - 1);
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    if (tokens[i + 1] < 0 || static_cast<size_t>(tokens[i + 1]) >= logits_.size()) {
      throw Error(Errc::invalid_argument, "token id " + std::to_string(tokens[i + 1]) + " outside the vocabulary");
    }
    step(tokens.subspan(i, 1), static_cast<int32_t>(i), true);
    // log softmax in double: the differences being measured are small.
    const double m = *std::max_element(logits_.begin(), logits_.end());
    double z = 0;
    for (float x : logits_) z += std::exp(static_cast<double>(x) - m);
    out.push_back(static_cast<double>(logits_[static_cast<size_t>(tokens[i + 1])]) - m - std::log(z));
  }
  return out;
}

std::vector<int32_t> Generator::generate(std::span<const int32_t> prompt, const GenerateRequest& request,
                                         const std::function<bool(int32_t)>& on_token) {
  if (prompt.empty()) throw Error(Errc::invalid_argument, "empty prompt");
  if (static_cast<int64_t>(prompt.size()) >= n_ctx_) {
    throw Error(Errc::invalid_argument, "prompt of " + std::to_string(prompt.size()) +
                                            " tokens leaves no room in a context of " + std::to_string(n_ctx_));
  }
  stats_ = {};
  stats_.prompt_tokens = static_cast<int64_t>(prompt.size());
  auto t0 = std::chrono::steady_clock::now();
  prompt_logits(prompt);
  stats_.prefill_seconds = seconds_since(t0);

  Sampler sampler(request.sampling);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  std::vector<int32_t> out;
  std::vector<int32_t> stops = request.stop_tokens;
  if (stops.empty()) stops.push_back(model_->vocab().eos_id);
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < request.max_new_tokens; ++i) {
    const int32_t token = sampler.sample(logits_, history, request.constraint);
    out.push_back(token);
    history.push_back(token);
    if (request.constraint != nullptr) request.constraint->accept(token);
    if (on_token && !on_token(token)) break;
    if (request.constraint != nullptr && request.constraint->done()) break;
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) break;
    if (static_cast<int64_t>(history.size()) >= n_ctx_) break;
    if (i + 1 == request.max_new_tokens) break;
    step(std::span(&token, 1), static_cast<int32_t>(history.size() - 1), true);
  }
  stats_.decode_seconds = seconds_since(t0);
  stats_.generated_tokens = static_cast<int64_t>(out.size());
  return out;
}

}  // namespace troupe
