// How a prompt's images travel through the scheduler: plain functions over
// PromptImage spans, so the actor stays a shell and tests need no actors.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "actors/messages.hpp"

namespace troupe {

// The prompt as the prefix cache sees it: each image's placeholder tokens
// replaced by keys drawn from the image's digest and the token's place in
// it. Two prompts then share KV blocks only where their images are the same
// bytes (the placeholders alone are equal for every image). The keys are
// negative, never a token id, and never reach a stage.
std::vector<int32_t> image_keyed_prompt(std::span<const int32_t> prompt, std::span<const PromptImage> images);

// The rows of `images` a step of n_tokens from position n_past puts in
// place of its tokens' embeddings.
std::vector<EmbedRows> step_embeds(std::span<const PromptImage> images, int32_t n_past, int32_t n_tokens);

// [2k] (begin, end) of the open images (PromptImage::open): what no prefill
// chunk may end inside (Request::whole_spans).
std::vector<int32_t> open_image_spans(std::span<const PromptImage> images);

// The open images' (begin, end) pairs a step of n_tokens from position
// n_past computes (StageSeq::open_spans).
std::vector<int32_t> step_open_spans(std::span<const PromptImage> images, int32_t n_past, int32_t n_tokens);

// Checks the spans the tokenizer and the vision actor made: in order,
// disjoint, inside the prompt, each with features of n_tokens rows (their
// width the first stage checks). Returns what is wrong, or "" when nothing is.
std::string check_prompt_images(std::span<const PromptImage> images, size_t prompt_size);

}  // namespace troupe
