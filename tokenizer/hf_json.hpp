// Internal to the tokenizer library (needs nlohmann-json, linked privately):
// reading tokenizer.json and tokenizer_config.json with every error naming
// the file and the JSON path ("pre_tokenizer.pretokenizers[1].type").
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "tokenizer/hf_bpe_tokenizer.hpp"
#include "tokenizer/hf_normalizer.hpp"
#include "tokenizer/hf_pre_tokenizer.hpp"
#include "tokenizer/unigram_tokenizer.hpp"
#include "tokenizer/wordpiece_tokenizer.hpp"

namespace troupe::hf {

using Json = nlohmann::json;

// A JSON node and where it is. Missing keys read as null.
class JsonAt {
 public:
  JsonAt(const Json& node, const std::string& file, std::string path)
      : node_(&node), file_(&file), path_(std::move(path)) {}

  const Json& node() const { return *node_; }
  const std::string& path() const { return path_; }
  const std::string& file() const { return *file_; }
  bool is_null() const { return node_->is_null(); }
  bool is_string() const { return node_->is_string(); }
  bool is_object() const { return node_->is_object(); }
  bool is_array() const { return node_->is_array(); }

  JsonAt operator[](const std::string& key) const;
  JsonAt operator[](size_t index) const;
  size_t size() const { return node_->size(); }

  std::string string() const;            // throws bad_format unless a string
  bool boolean() const;                  // throws bad_format unless a bool
  int64_t integer() const;               // throws bad_format unless an integer
  bool flag(const std::string& key, bool fallback) const;  // an optional bool member
  void expect_object() const;
  void expect_array() const;

  [[noreturn]] void bad(const std::string& what) const;          // Error(bad_format)
  [[noreturn]] void unsupported(const std::string& what) const;  // Error(unsupported)

 private:
  const Json* node_;
  const std::string* file_;
  std::string path_;
};

// Parses JSON text; throws Error(bad_format) naming file and the position.
Json parse_json(std::string_view text, const std::string& file);

// The pipeline parts of tokenizer.json; null means none.
Normalizer parse_normalizer(const JsonAt& at);
PreTokenizer parse_pre_tokenizer(const JsonAt& at);
HfDecoder parse_decoder(const JsonAt& at);

// A WordPiece "model" (its unk_token looked up in model_ids, the model's own
// vocab; in_model is left to the caller) and the decoder it runs with.
WordPieceModel parse_wordpiece_model(const JsonAt& model, const std::unordered_map<std::string, int32_t>& model_ids);
WordPieceDecoder parse_wordpiece_decoder(const JsonAt& at);

// A Unigram "model.vocab" ([[piece, score], ...]): each piece -> its
// position, into model_ids; returns the number of pieces. Refuses repeated
// pieces.
int32_t unigram_model_ids(const JsonAt& vocab, std::unordered_map<std::string, int32_t>& model_ids);
// The Unigram model (its vocab already checked by unigram_model_ids) and
// the normalizer, pre-tokenizer and decoder it runs with; top is the file.
UnigramPipeline parse_unigram_pipeline(const JsonAt& top);

// Special token texts tokenizer_config.json names; "" for none.
struct SpecialNames {
  std::string bos;
  std::string eos;
  std::string unk;
  std::string pad;
};

// The tokenizer a parsed tokenizer.json describes. names (from
// tokenizer_config.json) give BOS/EOS ids where the post-processor adds none.
std::unique_ptr<Tokenizer> build_tokenizer(const Json& root, const std::string& file, const SpecialNames& names);

}  // namespace troupe::hf
