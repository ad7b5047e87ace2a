// GGUF "t5" vocabularies -> the tokenizer.json an XLM-RoBERTa checkpoint
// ships, parsed by the tokenizer.json reader: one Unigram implementation
// (unigram_tokenizer.cpp), checked against Hugging Face's, serves both.
#include <nlohmann/json.hpp>
#include <string>

#include "core/base64.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/unigram_tokenizer.hpp"

namespace troupe {

std::unique_ptr<Tokenizer> unigram_from_gguf(const VocabData& vocab) {
  using nlohmann::json;
  const size_t n = vocab.tokens.size();
  auto type_of = [&](size_t id) {
    const int32_t t = vocab.token_types.empty() ? 1 : vocab.token_types[id];
    return static_cast<TokenType>(t == 0 ? 1 : t);
  };
  json pieces = json::array();
  json added = json::array();
  bool byte_pieces = false;
  for (size_t id = 0; id < n; ++id) {
    const std::string& text = vocab.tokens[id];
    const float score = vocab.scores.empty() ? 0.0f : vocab.scores[id];
    pieces.push_back(json::array({text, score}));
    const TokenType t = type_of(id);
    byte_pieces = byte_pieces || t == TokenType::byte;
    if (t == TokenType::control || t == TokenType::unknown || t == TokenType::user_defined) {
      added.push_back({{"id", id},
                       {"content", text},
                       {"special", t != TokenType::user_defined},
                       {"lstrip", text == "<mask>"},
                       {"rstrip", false},
                       {"normalized", false},
                       {"single_word", false}});
    }
  }
  json normalizers = json::array();
  if (!vocab.precompiled_charsmap.empty()) {
    normalizers.push_back(
        {{"type", "Precompiled"}, {"precompiled_charsmap", base64_encode(vocab.precompiled_charsmap)}});
  }
  if (vocab.remove_extra_whitespaces) {
    normalizers.push_back({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}});
  }
  const json metaspace = {{"type", "Metaspace"},
                          {"replacement", "\u2581"},
                          {"prepend_scheme", vocab.add_space_prefix ? "always" : "never"},
                          {"split", true}};
  json post = nullptr;
  const auto name = [&](int32_t id) { return json::array({vocab.tokens[static_cast<size_t>(id)], id}); };
  if (vocab.add_bos && vocab.bos_id >= 0 && vocab.add_eos && vocab.eos_id >= 0) {
    post = {{"type", "RobertaProcessing"}, {"sep", name(vocab.eos_id)}, {"cls", name(vocab.bos_id)}};
  } else if (vocab.add_eos && vocab.eos_id >= 0) {
    const std::string eos = vocab.tokens[static_cast<size_t>(vocab.eos_id)];
    post = {{"type", "TemplateProcessing"},
            {"single", json::array({{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                    {{"SpecialToken", {{"id", eos}, {"type_id", 0}}}}})},
            {"pair", json::array({{{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                  {{"SpecialToken", {{"id", eos}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "B"}, {"type_id", 0}}}},
                                  {{"SpecialToken", {{"id", eos}, {"type_id", 0}}}}})},
            {"special_tokens", {{eos, {{"id", eos}, {"ids", {vocab.eos_id}}, {"tokens", {eos}}}}}}};
  }
  const json doc = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", normalizers.empty() ? json(nullptr) : json{{"type", "Sequence"}, {"normalizers", normalizers}}},
      {"pre_tokenizer", metaspace},
      {"post_processor", post},
      {"decoder", metaspace},
      {"model", {{"type", "Unigram"}, {"unk_id", vocab.unk_id}, {"vocab", pieces}, {"byte_fallback", byte_pieces}}}};
  return tokenizer_from_hf_json(doc.dump(), "the GGUF's t5 vocabulary");
}

}  // namespace troupe
