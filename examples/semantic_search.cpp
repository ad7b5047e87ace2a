// Embeddings as a library call: an embedding model (a sentence-transformers
// directory or a GGUF with a pooling_type) ranks passages against a query
// by cosine similarity. The pipeline pools each text's hidden states as the
// model declares (last token or mean); the vectors come normalized.
//   semantic_search MODEL QUERY PASSAGE...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <future>
#include <string>
#include <vector>

#include "actors/pipeline.hpp"

namespace {

std::future<troupe::Completion> embed(troupe::Pipeline& p, const std::string& text) {
  troupe::EngineRequest r = troupe::EngineRequest::from_text({.text = text});
  r.params.embed.on = true;
  return p.generate(std::move(r));
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return dot / std::sqrt(na * nb);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL QUERY PASSAGE...\n", argv[0]);
    return 2;
  }
  try {
    auto pipeline = troupe::Pipeline::start({.model_path = argv[1], .embedding = true});
    // Every text at once: they share the pipeline's steps.
    std::vector<std::future<troupe::Completion>> runs;
    for (int i = 2; i < argc; ++i) runs.push_back(embed(*pipeline, argv[i]));
    std::vector<std::vector<float>> vectors;
    for (auto& r : runs) {
      const troupe::Completion c = r.get();
      if (c.final.reason != troupe::EndReason::stop) {
        std::fprintf(stderr, "semantic_search: %s\n", c.final.error_message.c_str());
        return 1;
      }
      vectors.push_back(c.final.embedding);
    }
    std::vector<std::pair<double, int>> ranked;
    for (int i = 1; i < static_cast<int>(vectors.size()); ++i) ranked.emplace_back(cosine(vectors[0], vectors[i]), i);
    std::sort(ranked.rbegin(), ranked.rend());
    std::printf("query: %s (%zu dimensions, %s pooling)\n", argv[2], vectors[0].size(),
                troupe::to_string(pipeline->model_info().pooling));
    for (const auto& [score, i] : ranked) std::printf("%.4f  %s\n", score, argv[i + 2]);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "semantic_search: %s\n", e.what());
    return 1;
  }
}
