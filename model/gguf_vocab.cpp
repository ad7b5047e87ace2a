// GGUF tokenizer metadata -> VocabData. Sizes and ids are checked here with
// the key names in the message; Tokenizer::create checks the rest.
#include "model/gguf_vocab.hpp"

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/error.hpp"

namespace troupe {
namespace {

constexpr uint32_t kNoToken = 0xFFFFFFFF;

int32_t token_id(const gguf::GgufFile& file, const char* key, size_t n_vocab) {
  const std::optional<uint32_t> v = file.find_u32(key);
  if (!v || *v == kNoToken) return -1;
  if (*v >= n_vocab) {
    throw Error(Errc::bad_format, file.path() + ": " + key + " = " + std::to_string(*v) +
                                      " is outside the vocabulary of " + std::to_string(n_vocab) + " tokens");
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

VocabData vocab_from_gguf(const gguf::GgufFile& file) {
  VocabData v;
  v.model = file.get_string("tokenizer.ggml.model");
  v.pre = file.find_string("tokenizer.ggml.pre").value_or("");
  v.tokens = file.get_string_array("tokenizer.ggml.tokens");
  const size_t n = v.tokens.size();

  auto check_size = [&](size_t got, const char* key) {
    if (got != n) {
      throw Error(Errc::bad_format, file.path() + ": " + key + " has " + std::to_string(got) +
                                        " entries but tokenizer.ggml.tokens has " + std::to_string(n));
    }
  };
  if (auto scores = file.find_f32_array("tokenizer.ggml.scores")) {
    check_size(scores->size(), "tokenizer.ggml.scores");
    v.scores = std::move(*scores);
  }
  if (auto types = file.find_i32_array("tokenizer.ggml.token_type")) {
    check_size(types->size(), "tokenizer.ggml.token_type");
    v.token_types = std::move(*types);
  }
  if (const auto* merges = file.find_string_array("tokenizer.ggml.merges")) v.merges = *merges;

  v.bos_id = token_id(file, "tokenizer.ggml.bos_token_id", n);
  v.eos_id = token_id(file, "tokenizer.ggml.eos_token_id", n);
  v.unk_id = token_id(file, "tokenizer.ggml.unknown_token_id", n);
  v.pad_id = token_id(file, "tokenizer.ggml.padding_token_id", n);
  v.eot_id = token_id(file, "tokenizer.ggml.eot_token_id", n);

  const bool spm = v.model == "llama";
  v.add_bos = file.find_bool("tokenizer.ggml.add_bos_token").value_or(spm);
  v.add_eos = file.find_bool("tokenizer.ggml.add_eos_token").value_or(false);
  v.add_space_prefix = file.find_bool("tokenizer.ggml.add_space_prefix").value_or(spm);
  v.lowercase = file.find_bool("tokenizer.ggml.normalizer.lowercase").value_or(false);
  v.remove_extra_whitespaces = file.find_bool("tokenizer.ggml.remove_extra_whitespaces").value_or(false);
  if (const gguf::Value* map = file.find("tokenizer.ggml.precompiled_charsmap")) {
    const auto* array = std::get_if<gguf::Array>(map);
    const auto* bytes = array != nullptr ? std::get_if<std::vector<uint8_t>>(&array->items) : nullptr;
    const auto* signed_bytes = array != nullptr ? std::get_if<std::vector<int8_t>>(&array->items) : nullptr;
    if (bytes != nullptr) {
      v.precompiled_charsmap.assign(bytes->begin(), bytes->end());
    } else if (signed_bytes != nullptr) {
      v.precompiled_charsmap.assign(signed_bytes->begin(), signed_bytes->end());
    } else {
      throw Error(Errc::bad_format, file.path() + ": tokenizer.ggml.precompiled_charsmap is " +
                                        gguf::describe_type(*map) + ", expected an array of u8");
    }
  }
  // A cross-encoder's pair, as llama.cpp's rerank joins one: BOS (add_bos)
  // A EOS, SEP (add_sep), B EOS: BERT's [CLS] A [SEP] B [SEP], RoBERTa's
  // <s> A </s></s> B </s>. B and what follows are token type 1 (used by a
  // model with a second token-type row: BERT).
  const int32_t sep = token_id(file, "tokenizer.ggml.seperator_token_id", n);  // llama.cpp's spelling
  if (v.add_eos && v.eos_id >= 0) {
    v.has_pair = true;
    v.pair_between = {v.eos_id};
    if (file.find_bool("tokenizer.ggml.add_sep_token").value_or(false) && sep >= 0) v.pair_between.push_back(sep);
    v.pair_after = {v.eos_id};
    v.pair_type1_from = static_cast<int32_t>(v.pair_between.size());
  }
  return v;
}

}  // namespace troupe
