// A causal reranker's input: a (query, document) pair written into the
// model's prompt template (Qwen3-Reranker's; a GGUF's
// tokenizer.chat_template.rerank), where {query} and {document} stand for
// the texts, then tokenized whole with special tokens matched, as
// llama.cpp's server and the model card's code tokenize it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace troupe {

// The template with every {query} and {document} replaced in one pass (a
// text holding "{document}" stays as it is). Throws Error(bad_format) for a
// template without {document}.
std::string render_rerank_prompt(std::string_view tmpl, std::string_view query, std::string_view document);

// The pair's ids. budget > 0 and the whole longer than it: the document's
// tail goes, as the model card's truncation cuts the text before the
// template's closing turn: the ids of everything up to the document's end,
// cut to budget minus the closing part's ids, then those. Throws
// Error(invalid_argument) when the closing part alone fills the budget.
std::vector<int32_t> encode_rerank_prompt(const Tokenizer& tok, std::string_view tmpl, std::string_view query,
                                          std::string_view document, int32_t budget);

}  // namespace troupe
