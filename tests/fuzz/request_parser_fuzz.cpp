// libFuzzer target for the HTTP request parsers (net/request_parser.cpp,
// net/embeddings_request.cpp, net/score_request.cpp, net/ollama_request.cpp):
// any bytes as a /v1/completions, a /v1/chat/completions, a /tokenize, a
// /detokenize, a /v1/embeddings, a /v1/rerank, a /v1/score, an /api/embed,
// an /api/embeddings, an /api/chat, an /api/generate and an /api/show body
// (net/ollama_chat_request.cpp), and Anthropic's /v1/messages and
// /v1/messages/count_tokens (net/anthropic_request.cpp), and OpenAI's
// /v1/responses (net/responses_request.cpp). The
// parser must either return a request within the limits or throw ApiError
// (a 400 with a JSON body); anything else (a crash, a sanitizer report,
// another exception) is a bug. Built and run by run_fuzzers.py.
#include <cstddef>
#include <cstdint>

#include "net/anthropic_request.hpp"
#include "net/embeddings_request.hpp"
#include "net/ollama_chat_request.hpp"
#include "net/ollama_request.hpp"
#include "net/responses_request.hpp"
#include "net/score_request.hpp"
#include "tests/fuzz/request_limits_check.hpp"

using namespace troupe::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = as_text(data, size);
  try {
    check_limits(troupe::net::parse_completion_request(text, kFuzzLimits), kFuzzLimits);
  } catch (const troupe::net::ApiError& e) {
    check_error(e);
  }
  try {
    check_limits(troupe::net::parse_chat_request(text, kFuzzLimits), kFuzzLimits);
  } catch (const troupe::net::ApiError& e) {
    check_error(e);
  }
  try {
    (void)troupe::net::parse_tokenize_request(text, kFuzzLimits);
  } catch (const troupe::net::ApiError& e) {
    check_error(e);
  }
  try {
    (void)troupe::net::parse_detokenize_request(text);
  } catch (const troupe::net::ApiError& e) {
    check_error(e);
  }
  try {
    constexpr int32_t kMaxInputs = 16;
    const troupe::net::EmbeddingsRequest r = troupe::net::parse_embeddings_request(text, kMaxInputs);
    // Exactly one kind of input, within the batch; ranges as documented.
    check(r.texts.empty() != r.token_lists.empty() && r.size() <= kMaxInputs);
    check(r.dimensions >= 0 && r.truncate >= -1);  // truncate 0: not given
    check(r.normalize >= -1 && r.normalize <= 1);
    for (const auto& ids : r.token_lists) check(!ids.empty());
  } catch (const troupe::net::ApiError& e) {
    check_error(e);
  }
  for (const bool legacy : {false, true}) {
    try {
      constexpr int32_t kMaxInputs = 16;
      const troupe::net::EmbeddingsRequest r = troupe::net::parse_ollama_embed(text, legacy, kMaxInputs);
      // A model always; the legacy route's one prompt; /api/embed normalized.
      check(!r.model.empty() && r.texts.empty() != r.token_lists.empty() && r.size() <= kMaxInputs);
      check(!legacy || (r.texts.size() == 1 && r.normalize == -1 && r.truncate == 0));
      check(legacy || (r.normalize == 1 && (r.truncate == -1 || r.truncate == 0)));
    } catch (const troupe::net::ApiError& e) {
      check_error(e);
    }
  }
  for (const bool chat : {true, false}) {
    try {
      const troupe::net::OllamaGenerateRequest g = chat ? troupe::net::parse_ollama_chat(text, kFuzzLimits)
                                                        : troupe::net::parse_ollama_generate(text, kFuzzLimits);
      // A model always; one choice within the limits (Ollama's own: up to
      // 16 stop strings, temperatures past 2); a chat has its messages, a
      // raw generate its one prompt.
      const troupe::net::ParsedRequest& r = g.request;
      check(!r.model.empty() && r.n == 1);
      check(!r.max_tokens || (*r.max_tokens >= 1 && *r.max_tokens <= kFuzzLimits.max_tokens));
      check(r.params.stop.size() <= 16);
      for (const std::string& s : r.params.stop) check(!s.empty());
      check(r.params.sampling.temperature >= 0.0f && r.params.sampling.temperature <= 100.0f);
      check(r.params.sampling.top_p > 0.0f && r.params.sampling.top_p <= 1.0f);
      check(r.top_logprobs >= 0 && r.top_logprobs <= 20 && g.logprobs == r.params.sampling.logprobs);
      if (r.endpoint == troupe::net::Endpoint::chat) {
        check(r.chat.messages.size() <= static_cast<size_t>(kFuzzLimits.max_messages) + 2);
        check(g.load_only == (chat ? r.chat.messages.empty() : r.chat.messages.back().content.empty()));
      } else {
        check(!chat && r.prompts.size() == 1 && g.load_only == r.prompts[0].empty());
      }
    } catch (const troupe::net::ApiError& e) {
      check_error(e);
    }
  }
  for (const bool count : {false, true}) {
    try {
      const troupe::net::AnthropicRequest a = count ? troupe::net::parse_anthropic_count_tokens(text, kFuzzLimits)
                                                    : troupe::net::parse_anthropic_messages(text, kFuzzLimits);
      // A chat with a model and its turns; max_tokens within the server's
      // bound; a prefill only after the assistant's words.
      const troupe::net::ParsedRequest& r = a.request;
      check(!r.model.empty() && r.endpoint == troupe::net::Endpoint::chat && !r.chat.messages.empty());
      check(count || (r.max_tokens && *r.max_tokens >= 1 && *r.max_tokens <= kFuzzLimits.max_tokens));
      check(r.params.stop.size() <= 16);
      check(!r.chat.continue_final_message ||
            (r.chat.messages.back().role == "assistant" && !r.chat.add_generation_prompt));
      check(r.params.sampling.temperature >= 0.0f && r.params.sampling.temperature <= 1.0f);
    } catch (const troupe::net::ApiError& e) {
      check_error(e);
    }
  }
  try {
    // A chat within the limits, whatever the input items were.
    const troupe::net::ResponsesRequest r = troupe::net::parse_responses_request(text, kFuzzLimits);
    check_limits(r.request, kFuzzLimits);
    check(r.request.endpoint == troupe::net::Endpoint::chat && r.request.n == 1 && !r.echo_json.empty());
  } catch (const troupe::net::ApiError& e) {
    check_error(e);
  }
  try {
    check(!troupe::net::parse_ollama_show(text).empty());
  } catch (const troupe::net::ApiError& e) {
    check_error(e);
  }
  for (const bool rerank : {true, false}) {
    try {
      constexpr int32_t kMaxPairs = 16;
      const troupe::net::ScoreRequest r = rerank ? troupe::net::parse_rerank_request(text, kMaxPairs)
                                                 : troupe::net::parse_score_request(text, kMaxPairs);
      // One first text for all, or one per second text; within the batch.
      check(r.rerank == rerank && !r.second.empty() && r.second.size() <= kMaxPairs);
      check(r.first.size() == 1 || r.first.size() == r.second.size());
      check(r.top_n >= 0 && r.truncate >= -1 && r.truncate != 0);
      for (size_t i = 0; i < r.size(); ++i) (void)r.first_of(i);
    } catch (const troupe::net::ApiError& e) {
      check_error(e);
    }
  }
  return 0;
}
