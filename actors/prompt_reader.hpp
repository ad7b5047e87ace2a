// What the tokenizer actor does to each request, as a plain class (the
// actor is its thin shell): render a conversation with the chat template,
// encode text, take ids as they are, and apply every model rule
// (actors/request_rules.hpp). Tests and fakes use it without actors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/request_types.hpp"
#include "tokenizer/chat_prompter.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

// Where an image's features go in a prompt: n_tokens placeholder tokens
// from `position` (a vision-language model's processor expands each image's
// one token to as many as its features have rows).
struct ImageSpan {
  int32_t position = 0;
  int32_t n_tokens = 0;
};

class PromptReader {
 public:
  PromptReader(std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<const ChatPrompter> prompter,
               ModelInfo model);

  // The request's prompt ids, every rule checked, and its max_new_tokens
  // fitted to the context. Throws RequestError naming the field at fault,
  // or Error (internal: the chat template itself failed). A chat's images
  // (a vision-language model) set `images`, one span per image in order;
  // without `images`, a request with images is refused.
  std::vector<int32_t> admit(EngineRequest& request, std::vector<ImageSpan>* images = nullptr) const;

  // The ids a request with this prompt would get (text or chat), checked
  // against the vocabulary; or, with detokenize, the text of
  // request.tokens. Never throws: errors are in the answer.
  TokenizeAnswer tokenize(EngineRequest request, bool detokenize) const;

  // The prompt's text as the model sees it (special tokens written out).
  std::string text_of(const std::vector<int32_t>& ids) const;

  const ModelInfo& model() const { return model_; }

 private:
  std::vector<int32_t> prompt_ids(EngineRequest& request, std::vector<ImageSpan>* images) const;
  // Each image's placeholder token expanded to ModelInfo::image_tokens; the
  // placeholders must be exactly one per image.
  std::vector<int32_t> expand_images(const std::vector<int32_t>& ids, const EngineRequest& request,
                                     std::vector<ImageSpan>* images) const;
  // A cross-encoder's pair input, truncated as tokenizers' longest_first
  // does; sets request.params.embed.type1_from.
  std::vector<int32_t> pair_ids(EngineRequest& request, const std::string& field) const;

  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const ChatPrompter> prompter_;
  ModelInfo model_;
};

}  // namespace troupe
