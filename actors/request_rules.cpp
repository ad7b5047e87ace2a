// Each rule's wording is the API's: clients read these messages.
#include "actors/request_rules.hpp"

#include <algorithm>

#include "model/sampler.hpp"

namespace troupe {

void check_generate_params(const GenerateParams& p) {
  if (p.max_new_tokens < 1) {
    throw RequestError(Errc::invalid_argument, "max_tokens",
                       "max_tokens must be at least 1, got " + std::to_string(p.max_new_tokens));
  }
  for (size_t i = 0; i < p.stop.size(); ++i) {
    if (p.stop[i].empty()) {
      throw RequestError(Errc::invalid_argument, "stop[" + std::to_string(i) + "]", "stop strings must not be empty");
    }
  }
  if (p.thinking_budget < -1) {
    throw RequestError(Errc::invalid_argument, "thinking.budget_tokens",
                       "thinking.budget_tokens must be at least 0, got " + std::to_string(p.thinking_budget));
  }
  check_sampling(p.sampling);
}

void check_embed_params(EmbedParams& e, const ModelInfo& model) {
  const bool embedding_model = model.pooling != Pooling::none;
  if (embedding_model && !e.on) {
    throw RequestError(Errc::invalid_argument, "model",
                       model.name + " is an embedding model: it answers /v1/embeddings, and generates no text");
  }
  if (!embedding_model && e.on) {
    throw RequestError(Errc::invalid_argument, "model",
                       model.name +
                           " generates text and serves no embeddings (an embedding model, or "
                           "--embedding, makes an embedding server)");
  }
  if (!e.on) return;
  if (model.n_labels > 0) {
    // A classifier's scores are returned as its head computes them.
    if (e.dimensions != 0) {
      throw RequestError(Errc::invalid_argument, "dimensions",
                         model.name + " is a sequence classifier: its output is " + std::to_string(model.n_labels) +
                             " label score(s), not a vector to shorten");
    }
    e.pooling = model.pooling;
    e.normalize = 0;
    return;
  }
  if (e.dimensions < 0 || e.dimensions > model.n_embd) {
    throw RequestError(Errc::invalid_argument, "dimensions",
                       "dimensions must be between 1 and the model's " + std::to_string(model.n_embd) + ", got " +
                           std::to_string(e.dimensions));
  }
  e.pooling = model.pooling;
  if (e.normalize < 0) e.normalize = model.normalize ? 1 : 0;
}

void check_embed_truncate(int32_t truncate, const ModelInfo& model) {
  const int32_t context_length = model.context_length;
  if (truncate < -1) {
    throw RequestError(Errc::invalid_argument, "truncate_prompt_tokens",
                       "truncate_prompt_tokens must be -1 (the context) or at least 1, got " +
                           std::to_string(truncate));
  }
  if (truncate > context_length) {
    throw RequestError(Errc::too_long, "truncate_prompt_tokens",
                       "truncate_prompt_tokens " + std::to_string(truncate) + " is more than the context holds (" +
                           std::to_string(context_length) + " tokens)");
  }
}

void fit_embed_input(std::vector<int32_t>& ids, int32_t truncate, const ModelInfo& model,
                     std::string_view prompt_param) {
  const int32_t context_length = model.context_length;
  check_embed_truncate(truncate, model);
  const auto keep = static_cast<size_t>(truncate == -1 ? context_length : truncate);
  if (truncate != 0 && ids.size() > keep) {
    if (!model.encoder) {
      ids.erase(ids.begin(), ids.end() - static_cast<ptrdiff_t>(keep));
    } else {
      const size_t tail = model.eos >= 0 && ids.back() == model.eos && keep >= 2 ? 1 : 0;
      ids.erase(ids.begin() + static_cast<ptrdiff_t>(keep - tail), ids.end() - static_cast<ptrdiff_t>(tail));
    }
  }
  if (static_cast<int64_t>(ids.size()) > context_length) {
    throw RequestError(Errc::too_long, std::string(prompt_param),
                       "the input has " + std::to_string(ids.size()) + " tokens but the context holds " +
                           std::to_string(context_length) + " (truncate_prompt_tokens keeps " +
                           (model.encoder ? "the first ones and the closing [SEP])" : "the last ones)"));
  }
}

void check_logit_bias(std::span<const TokenBias> bias, int32_t n_vocab) {
  for (const TokenBias& b : bias) {
    if (b.token < 0 || b.token >= n_vocab) {
      throw RequestError(Errc::invalid_argument, "logit_bias",
                         "logit_bias names token " + std::to_string(b.token) + ", outside the vocabulary [0, " +
                             std::to_string(n_vocab) + ")");
    }
  }
}

void check_output_format(const OutputFormat& format) {
  if (!format.constrained()) return;
  try {
    (void)output_grammar(format);
  } catch (const Error& e) {
    throw RequestError(Errc::invalid_argument, format.param.empty() ? "response_format" : format.param, e.what());
  }
}

void check_prompt_tokens(std::span<const int32_t> ids, int32_t n_vocab, std::string_view param) {
  for (size_t j = 0; j < ids.size(); ++j) {
    if (ids[j] < 0 || ids[j] >= n_vocab) {
      throw RequestError(Errc::invalid_argument, std::string(param) + "[" + std::to_string(j) + "]",
                         "token id " + std::to_string(ids[j]) + " is outside the vocabulary [0, " +
                             std::to_string(n_vocab) + ")");
    }
  }
}

void ensure_prompt(std::vector<int32_t>& ids, int32_t bos, std::string_view param) {
  if (!ids.empty()) return;
  if (bos < 0) {
    throw RequestError(Errc::invalid_argument, std::string(param),
                       "'" + std::string(param) + "' must not be empty for this model (it has no BOS token)");
  }
  ids.push_back(bos);
}

int32_t fit_to_context(int32_t n_prompt, int32_t max_new_tokens, bool fit, int32_t context_length,
                       std::string_view prompt_param) {
  if (n_prompt >= context_length) {
    throw RequestError(Errc::too_long, std::string(prompt_param),
                       "the prompt has " + std::to_string(n_prompt) + " tokens but the context holds " +
                           std::to_string(context_length) + " (prompt and completion together)");
  }
  if (fit) return std::min(max_new_tokens, context_length - n_prompt);
  if (static_cast<int64_t>(n_prompt) + max_new_tokens > context_length) {
    throw RequestError(Errc::too_long, "max_tokens",
                       "max_tokens " + std::to_string(max_new_tokens) + " plus the prompt's " +
                           std::to_string(n_prompt) + " tokens exceed the context of " +
                           std::to_string(context_length) + " tokens");
  }
  return max_new_tokens;
}

}  // namespace troupe
