// A GGUF "bert" vocabulary as a WordPieceTokenizer: llama.cpp's converter
// spells a word's first piece "\u2581piece" and a continuing one "piece"
// (tokenizer.json: "piece" and "##piece"); control tokens ([CLS], [SEP],
// [UNK], ...) keep their text.
#include <string>
#include <utility>

#include "core/error.hpp"
#include "tokenizer/wordpiece_tokenizer.hpp"

namespace troupe {

std::unique_ptr<Tokenizer> wordpiece_from_gguf(VocabData vocab) {
  constexpr std::string_view kPhantom = "\xE2\x96\x81";  // U+2581
  const size_t n = vocab.tokens.size();
  if (vocab.unk_id < 0) throw Error(Errc::bad_format, "bert vocabulary: no unknown_token_id");
  for (size_t i = 0; i < n; ++i) {
    const bool control = !vocab.token_types.empty() &&
                         vocab.token_types[i] != static_cast<int32_t>(TokenType::normal) &&
                         vocab.token_types[i] != 0;  // 0: llama.cpp's "undefined", read as normal
    std::string& t = vocab.tokens[i];
    if (control) continue;
    t = t.starts_with(kPhantom) ? t.substr(kPhantom.size()) : "##" + t;
  }
  WordPiecePipeline p;
  // bert-base-uncased's normalizer when the file lower-cases (strip_accents
  // then follows lowercase, as a null in tokenizer.json does); a cased one's
  // otherwise.
  hf::NormalizerStep norm{.kind = hf::NormalizerStep::Kind::bert};
  norm.bert = {
      .clean_text = true, .handle_chinese_chars = true, .strip_accents = vocab.lowercase, .lowercase = vocab.lowercase};
  p.normalizer = hf::Normalizer({norm});
  p.pre_tokenizer = hf::PreTokenizer({hf::CharClassStep{.kind = hf::CharClassStep::Kind::bert}});
  p.model.in_model.assign(n, true);
  p.model.unk_id = vocab.unk_id;
  p.model.continuing_subword_prefix = "##";
  p.decoder = {.prefix = "##", .cleanup = true};
  return std::make_unique<WordPieceTokenizer>(std::move(vocab), std::move(p));
}

}  // namespace troupe
