// A (query, document) pair through a causal reranker's prompt template
// (tokenizer/rerank_prompt.hpp).
#include "tokenizer/rerank_prompt.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace troupe {
namespace {

constexpr std::string_view kQuery = "{query}";
constexpr std::string_view kDocument = "{document}";

// Every {query} and {document} of tmpl replaced, in one pass.
std::string substitute(std::string_view tmpl, std::string_view query, std::string_view document) {
  std::string out;
  out.reserve(tmpl.size() + query.size() + document.size());
  size_t i = 0;
  while (i < tmpl.size()) {
    const std::string_view rest = tmpl.substr(i);
    if (rest.starts_with(kQuery)) {
      out += query;
      i += kQuery.size();
    } else if (rest.starts_with(kDocument)) {
      out += document;
      i += kDocument.size();
    } else {
      out += tmpl[i++];
    }
  }
  return out;
}

}  // namespace

std::string render_rerank_prompt(std::string_view tmpl, std::string_view query, std::string_view document) {
  if (tmpl.find(kDocument) == std::string_view::npos) {
    throw Error(Errc::bad_format, "the rerank prompt template has no {document}");
  }
  return substitute(tmpl, query, document);
}

std::vector<int32_t> encode_rerank_prompt(const Tokenizer& tok, std::string_view tmpl, std::string_view query,
                                          std::string_view document, int32_t budget) {
  std::vector<int32_t> ids = tok.encode(render_rerank_prompt(tmpl, query, document), /*add_special=*/false,
                                        /*parse_special=*/true);
  if (budget <= 0 || ids.size() <= static_cast<size_t>(budget)) return ids;
  // The closing part (after the first {document}) is kept whole; what comes
  // before it, the document included, loses its tail.
  const size_t at = tmpl.find(kDocument);
  const std::string_view closing = tmpl.substr(at + kDocument.size());
  const std::vector<int32_t> tail = tok.encode(substitute(closing, query, document), false, true);
  if (tail.size() >= static_cast<size_t>(budget)) {
    throw Error(Errc::invalid_argument, "the rerank prompt's closing part alone is " + std::to_string(tail.size()) +
                                            " tokens, and the budget is " + std::to_string(budget));
  }
  ids = tok.encode(substitute(tmpl.substr(0, at), query, document) + std::string(document), false, true);
  ids.resize(std::min(ids.size(), static_cast<size_t>(budget) - tail.size()));
  ids.insert(ids.end(), tail.begin(), tail.end());
  return ids;
}

}  // namespace troupe
