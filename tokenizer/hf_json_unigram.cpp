// tokenizer.json's Unigram model -> the parts of unigram_tokenizer.hpp. The
// vocab is [[piece, score], ...] and a piece's id is its position, as Hugging
// Face's deserializer reads it; unk_id must name a piece (a file without one
// would fail in Hugging Face on the first unknown character, so it is
// refused here).
#include <climits>
#include <string>

#include "core/error.hpp"
#include "tokenizer/hf_json.hpp"

namespace troupe::hf {

int32_t unigram_model_ids(const JsonAt& vocab, std::unordered_map<std::string, int32_t>& model_ids) {
  vocab.expect_array();
  if (vocab.size() >= static_cast<size_t>(INT32_MAX)) vocab.bad("has too many pieces");
  const auto n = static_cast<int32_t>(vocab.size());
  model_ids.reserve(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    const JsonAt entry = vocab[static_cast<size_t>(id)];
    if (!entry.is_array() || entry.size() != 2) entry.bad("expected [piece, score]");
    const std::string piece = entry[0].string();
    if (!entry[1].node().is_number()) entry[1].bad("expected a number (the piece's log probability)");
    const auto [it, added] = model_ids.emplace(piece, id);
    if (!added) {
      entry[0].unsupported("piece '" + piece + "' is also id " + std::to_string(it->second) +
                           "; repeated pieces are not supported");
    }
  }
  return n;
}

UnigramPipeline parse_unigram_pipeline(const JsonAt& top) {
  const JsonAt model = top["model"];
  const JsonAt vocab = model["vocab"];
  UnigramPipeline p;
  p.model.scores.reserve(vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) p.model.scores.push_back(vocab[i][1].node().get<double>());
  const JsonAt unk = model["unk_id"];
  if (unk.is_null()) unk.unsupported("a Unigram model without an unk_id is not supported");
  const int64_t unk_id = unk.integer();
  if (unk_id < 0 || unk_id >= static_cast<int64_t>(vocab.size())) {
    unk.bad(std::to_string(unk_id) + " is outside model.vocab (" + std::to_string(vocab.size()) + " pieces)");
  }
  p.model.unk_id = static_cast<int32_t>(unk_id);
  p.model.byte_fallback = model.flag("byte_fallback", false);
  p.normalizer = parse_normalizer(top["normalizer"]);
  p.pre_tokenizer = parse_pre_tokenizer(top["pre_tokenizer"]);
  p.decoder = parse_decoder(top["decoder"]);
  return p;
}

}  // namespace troupe::hf
