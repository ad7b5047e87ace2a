// Loading Hugging Face tokenizer folders: tokenizer.json (BPE model with
// byte-level or SentencePiece-style pipelines, WordPiece with BERT's,
// Unigram with XLM-RoBERTa's and T5's),
// tokenizer_config.json (BOS/EOS, chat templates) and chat_template.jinja; or
// GPT-2's original encoder.json + vocab.bpe (also named vocab.json +
// merges.txt). docs/models.md lists what is supported.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace troupe {

// tokenizer_config.json as transformers reads it. Token texts are "" and ids
// -1 where the folder names none.
struct HfTokenizerConfig {
  std::string bos_token;
  int32_t bos_id = -1;
  std::string eos_token;
  int32_t eos_id = -1;
  std::string unk_token;
  int32_t unk_id = -1;
  std::string pad_token;
  int32_t pad_id = -1;
  std::vector<std::string> additional_special_tokens;
  // As written in tokenizer_config.json. transformers 5 ignores both when a
  // tokenizer.json exists (its post-processor decides), and so does Troupe.
  std::optional<bool> add_bos_token;
  std::optional<bool> add_eos_token;
  // What encode(text, add_special=true, ...) adds: tokenizer.json's
  // post-processor (TemplateProcessing) decides.
  bool add_bos = false;
  bool add_eos = false;
  // The default chat template ("" if none) and every named one. A
  // chat_template.jinja file (and additional_chat_templates/*.jinja) takes
  // precedence over tokenizer_config.json's "chat_template", as in transformers.
  std::string chat_template;
  std::map<std::string, std::string> chat_templates;
};

struct HfTokenizer {
  std::unique_ptr<Tokenizer> tokenizer;
  HfTokenizerConfig config;
};

// Reads dir/tokenizer.json if present, else dir/encoder.json + dir/vocab.bpe
// (or vocab.json + merges.txt), and dir/tokenizer_config.json if present.
// Throws Error(io) for missing or unreadable files, Error(bad_format) for
// malformed JSON or contradictions (naming the file and JSON path), and
// Error(unsupported) naming the JSON path of a construct Troupe does not
// implement.
HfTokenizer load_hf_tokenizer_files(const std::string& dir);

// load_hf_tokenizer_files(dir).tokenizer.
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& dir);

// A tokenizer from tokenizer.json's text alone (no tokenizer_config.json):
// BOS/EOS come from its post-processor. file_name is used in messages.
std::unique_ptr<Tokenizer> tokenizer_from_hf_json(std::string_view json_text,
                                                  const std::string& file_name = "tokenizer.json");

}  // namespace troupe
