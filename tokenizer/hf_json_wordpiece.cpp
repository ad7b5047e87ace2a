// tokenizer.json's WordPiece model and WordPiece decoder -> the parts of
// wordpiece_tokenizer.hpp. The four model fields are required, as Hugging
// Face's deserializer requires them.
#include "core/error.hpp"
#include "tokenizer/hf_json.hpp"

namespace troupe::hf {

WordPieceModel parse_wordpiece_model(const JsonAt& model, const std::unordered_map<std::string, int32_t>& model_ids) {
  WordPieceModel m;
  const JsonAt unk = model["unk_token"];
  const auto it = model_ids.find(unk.string());
  if (it == model_ids.end()) unk.bad("'" + unk.string() + "' is not in model.vocab");
  m.unk_id = it->second;
  m.continuing_subword_prefix = model["continuing_subword_prefix"].string();
  const JsonAt max_chars = model["max_input_chars_per_word"];
  const int64_t limit = max_chars.integer();
  if (limit < 0) max_chars.bad("expected a count, not " + std::to_string(limit));
  m.max_input_chars_per_word = static_cast<size_t>(limit);
  return m;
}

WordPieceDecoder parse_wordpiece_decoder(const JsonAt& at) {
  if (at.is_null()) {
    at.unsupported("no decoder (Hugging Face would join WordPiece tokens with spaces) is not supported");
  }
  at.expect_object();
  const std::string type = at["type"].string();
  if (type != "WordPiece") {
    at["type"].unsupported("decoder '" + type + "' with a WordPiece model is not supported; supported: WordPiece");
  }
  WordPieceDecoder d;
  if (!at["prefix"].is_null()) d.prefix = at["prefix"].string();
  d.cleanup = at.flag("cleanup", true);
  return d;
}

}  // namespace troupe::hf
