// The model-dependent rules a request meets before it takes a queue slot,
// each in one function with one error: a RequestError naming the request
// field at fault. The tokenizer actor applies them to every request, so
// HTTP, WebSocket, the CLI and the experiments all meet the same rule
// worded the same way. (Sampling ranges, which need no model, are
// check_sampling in model/sampler.hpp.)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "actors/request_types.hpp"

namespace troupe {

// max_new_tokens >= 1, no empty stop string, sampling in range.
void check_generate_params(const GenerateParams& params);

// An embedding pipeline (model.pooling not none) takes embedding requests
// only, and a generating one none, each refused naming what the model does;
// `dimensions` in [0, n_embd]. Fills the request's pooling and normalization
// from the pipeline's where it names none (a cross-encoder's scores are
// never normalized).
void check_embed_params(EmbedParams& embed, const ModelInfo& model);

// An embedding request's input may fill the context (nothing is generated).
// With `truncate` (EmbedParams) a longer one loses its first tokens (a
// causal model pools its end), or, for an encoder (ModelInfo::encoder), the
// tokens before its last one when that is `eos` ([SEP]) and else its last
// ones: as Hugging Face truncates a BERT input, keeping [CLS] and [SEP].
void fit_embed_input(std::vector<int32_t>& ids, int32_t truncate, const ModelInfo& model,
                     std::string_view prompt_param);
// truncate_prompt_tokens is -1, 0 or in [1, the context].
void check_embed_truncate(int32_t truncate, const ModelInfo& model);

// Every logit_bias token in [0, n_vocab).
void check_logit_bias(std::span<const TokenBias> bias, int32_t n_vocab);

// A constrained format compiles (the grammar is cached for the sampler);
// the compiler's error is given as a RequestError naming the field that
// gave the format (response_format unless another).
void check_output_format(const OutputFormat& format);

// Every id in [0, n_vocab). param: the field holding the prompt; the error
// names the position ("prompt[3]").
void check_prompt_tokens(std::span<const int32_t> ids, int32_t n_vocab, std::string_view param);

// An empty prompt becomes BOS where the model has one (there is nothing to
// continue otherwise); without one it is refused.
void ensure_prompt(std::vector<int32_t>& ids, int32_t bos, std::string_view param);

// The number of tokens to generate: max_new_tokens, cut to what the context
// leaves after the prompt when `fit`; refused (Errc::too_long) when the
// prompt leaves no room, or, without `fit`, when prompt + max_new_tokens
// exceed the context.
int32_t fit_to_context(int32_t n_prompt, int32_t max_new_tokens, bool fit, int32_t context_length,
                       std::string_view prompt_param);

}  // namespace troupe
