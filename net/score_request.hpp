// POST /v1/rerank (Jina's and Cohere's rerank API, as vLLM and llama-server
// serve it) and POST /v1/score (vLLM's): texts to score against each
// other, by a cross-encoder (one pass over each pair) or an embedding model
// (the cosine of the two texts' vectors).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::net {

struct ScoreRequest {
  std::string model;    // empty: not given
  bool rerank = false;  // the reply's shape: /v1/rerank's results, else /v1/score's data
  // The pairs scored are (first[i], second[i]) when first holds as many
  // texts as second, else (first[0], second[i]): rerank's query against
  // each document, score's 1:N.
  std::vector<std::string> first;
  std::vector<std::string> second;
  int32_t top_n = 0;             // rerank: the best n results only; 0: all
  bool return_documents = true;  // rerank: each result carries its document's text
  int32_t truncate = -1;         // EmbedParams::truncate; a pair is cut to fit the context unless told
                                 // (the rerank APIs truncate long documents)

  size_t size() const { return second.size(); }
  const std::string& first_of(size_t i) const { return first.size() == 1 ? first[0] : first[i]; }
};

// Throw ApiError(400) naming the field at fault. max_pairs bounds the
// documents (rerank) or pairs (score).
ScoreRequest parse_rerank_request(std::string_view body, int32_t max_pairs);
ScoreRequest parse_score_request(std::string_view body, int32_t max_pairs);

}  // namespace troupe::net
