// A chat answer's <think>...</think> block, returned apart from the answer
// as reasoning_content (the field vLLM, SGLang and llama.cpp use), the way
// reasoning models (Qwen3, DeepSeek-R1 and their distills) write it. The
// block counts only where it opens the output, or where the chat template
// opened it in the prompt (starts_open); a "<think>" further on is text.
// The reasoning is trimmed of the blank lines around it, and the answer of
// those before it.
#pragma once

#include <string>
#include <string_view>

namespace troupe::net {

struct ReasoningParts {
  std::string reasoning;
  std::string content;
};

// Streams an output: each piece gives what is decided of both parts; a
// tag's first bytes, and spaces that may end the reasoning, wait for the
// next piece.
class ReasoningStream {
 public:
  explicit ReasoningStream(bool starts_open);
  ReasoningParts push(std::string_view piece);
  ReasoningParts finish();

 private:
  enum class State { undecided, reasoning, answer_start, answer };
  ReasoningParts step(bool last);

  State state_;
  std::string held_;              // bytes not yet given out
  bool reasoning_began_ = false;  // a non-space byte of reasoning was given out
  bool repeat_checked_ = false;   // a repeated open tag was looked for (and dropped)
};

// The parts of a whole output: ReasoningStream over one piece.
ReasoningParts split_reasoning(std::string_view text, bool starts_open);

}  // namespace troupe::net
