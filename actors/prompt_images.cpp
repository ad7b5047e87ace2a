#include "actors/prompt_images.hpp"

#include <algorithm>
#include <string>

namespace troupe {
namespace {

// splitmix64's finalizer: nearby inputs (a digest plus consecutive offsets)
// give unrelated outputs.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<int32_t> image_keyed_prompt(std::span<const int32_t> prompt, std::span<const PromptImage> images) {
  std::vector<int32_t> keyed(prompt.begin(), prompt.end());
  for (const PromptImage& im : images) {
    for (int32_t i = 0; i < im.n_tokens; ++i) {
      const auto bits = static_cast<uint32_t>(mix(im.digest + static_cast<uint64_t>(i))) | 0x80000000u;
      keyed[static_cast<size_t>(im.position + i)] = static_cast<int32_t>(bits);
    }
  }
  return keyed;
}

std::vector<EmbedRows> step_embeds(std::span<const PromptImage> images, int32_t n_past, int32_t n_tokens) {
  std::vector<EmbedRows> rows;
  const int32_t end = n_past + n_tokens;
  for (const PromptImage& im : images) {
    const int32_t from = std::max(n_past, im.position);
    const int32_t to = std::min(end, im.position + im.n_tokens);
    if (from >= to) continue;
    rows.push_back({.offset = from - n_past, .first = from - im.position, .n_rows = to - from, .rows = im.features});
  }
  return rows;
}

std::vector<int32_t> open_image_spans(std::span<const PromptImage> images) {
  std::vector<int32_t> spans;
  for (const PromptImage& im : images) {
    if (im.open) spans.insert(spans.end(), {im.position, im.position + im.n_tokens});
  }
  return spans;
}

std::vector<int32_t> step_open_spans(std::span<const PromptImage> images, int32_t n_past, int32_t n_tokens) {
  std::vector<int32_t> spans;
  for (const PromptImage& im : images) {
    if (im.open && im.position < n_past + n_tokens && im.position + im.n_tokens > n_past) {
      spans.insert(spans.end(), {im.position, im.position + im.n_tokens});
    }
  }
  return spans;
}

std::string check_prompt_images(std::span<const PromptImage> images, size_t prompt_size) {
  int64_t end = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const PromptImage& im = images[i];
    const std::string name = "image " + std::to_string(i);
    if (im.position < end || im.n_tokens <= 0 ||
        int64_t{im.position} + im.n_tokens > static_cast<int64_t>(prompt_size)) {
      return name + "'s tokens [" + std::to_string(im.position) + ", +" + std::to_string(im.n_tokens) +
             ") overlap another image's or leave the prompt of " + std::to_string(prompt_size) + " tokens";
    }
    if (!im.features || im.features->rows != im.n_tokens || im.features->cols <= 0) {
      return name + " has no features of " + std::to_string(im.n_tokens) + " rows";
    }
    end = int64_t{im.position} + im.n_tokens;
  }
  return {};
}

}  // namespace troupe
