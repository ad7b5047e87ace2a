// tokenizer.json -> HfBpeTokenizer or WordPieceTokenizer: the model's vocab
// (and BPE merges, hf_json_wordpiece.cpp's WordPiece fields), the added tokens
// (matched in text before the model), the post-processor's BOS/EOS (or
// BERT's [CLS]/[SEP]), and the normalizer/pre-tokenizer/decoder of
// hf_json_pipeline.cpp.
#include <algorithm>
#include <climits>
#include <unordered_map>

#include "core/error.hpp"
#include "tokenizer/hf_json.hpp"

namespace troupe::hf {
namespace {

// The largest vocabulary and merge list accepted (docs/models.md): real
// tokenizers have at most about 262k tokens (Gemma 3) and fewer merges.
constexpr int32_t kMaxVocab = 1 << 22;
constexpr size_t kMaxMerges = size_t{1} << 21;  // Llama 3 has 280,147

struct AddedToken {
  int32_t id;
  std::string content;
  bool special;
  bool normalized;
  uint8_t strip;  // VocabData::kLstrip | kRstrip
};

int32_t id_of(const JsonAt& at) {
  const int64_t id = at.integer();
  if (id < 0 || id >= INT32_MAX) at.bad("token id " + std::to_string(id) + " is out of range");
  return static_cast<int32_t>(id);
}

std::vector<AddedToken> parse_added_tokens(const JsonAt& list) {
  std::vector<AddedToken> out;
  if (list.is_null()) return out;
  list.expect_array();
  for (size_t i = 0; i < list.size(); ++i) {
    const JsonAt t = list[i];
    t.expect_object();
    // Whole-word matching changes what is matched; no supported file uses
    // it, so refuse rather than tokenize differently.
    if (t.flag("single_word", false)) t["single_word"].unsupported("single_word = true is not supported");
    const auto strip = static_cast<uint8_t>((t.flag("lstrip", false) ? VocabData::kLstrip : 0) |
                                            (t.flag("rstrip", false) ? VocabData::kRstrip : 0));
    AddedToken a{id_of(t["id"]), t["content"].string(), t.flag("special", false), t.flag("normalized", false), strip};
    if (a.content.empty()) t["content"].bad("empty added token");
    out.push_back(std::move(a));
  }
  return out;
}

// The ids TemplateProcessing puts before and after the text ($A), -1 if
// none, and its pair template (VocabData::has_pair and the pair_ fields).
struct Template {
  int32_t prefix = -1;
  int32_t suffix = -1;
  bool has_pair = false;
  std::vector<int32_t> pair_between;
  std::vector<int32_t> pair_after;
  int32_t pair_type1_from = -1;
};

// The one id of a template item's special token.
int32_t template_special_id(const JsonAt& specials, const JsonAt& special) {
  const std::string name = special["id"].string();
  const JsonAt ids = specials[name]["ids"];
  ids.expect_array();
  if (ids.size() != 1) ids.unsupported("a special token of " + std::to_string(ids.size()) + " ids is not supported");
  return id_of(ids[0]);
}

void parse_single_template(const JsonAt& at, Template& t) {
  const JsonAt single = at["single"];
  single.expect_array();
  const JsonAt specials = at["special_tokens"];
  bool seen_a = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const JsonAt item = single[i];
    item.expect_object();
    if (!item["Sequence"].is_null()) {
      if (item["Sequence"]["id"].string() != "A" || seen_a) item.unsupported("only one $A sequence is supported");
      seen_a = true;
      continue;
    }
    const JsonAt special = item["SpecialToken"];
    if (special.is_null()) item.bad("expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    int32_t& slot = seen_a ? t.suffix : t.prefix;
    if (slot >= 0) item.unsupported("more than one special token " + std::string(seen_a ? "after" : "before") +
                                    " the text is not supported");
    slot = template_special_id(specials, special);
  }
  if (!seen_a) single.bad("no $A sequence");
}

// The pair template: the single template's prefix, $A, specials, $B,
// specials; token types 0 then 1 (BERT's segments), never back.
void parse_pair_template(const JsonAt& at, Template& t) {
  const JsonAt pair = at["pair"];
  if (pair.is_null()) return;
  pair.expect_array();
  const JsonAt specials = at["special_tokens"];
  int part = 0;  // 0: before $A, 1: between $A and $B, 2: after $B
  int32_t last_type = 0;
  std::vector<int32_t> prefix;
  for (size_t i = 0; i < pair.size(); ++i) {
    const JsonAt item = pair[i];
    item.expect_object();
    const bool sequence = !item["Sequence"].is_null();
    const JsonAt body = sequence ? item["Sequence"] : item["SpecialToken"];
    if (body.is_null()) item.bad("expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    const auto type = static_cast<int32_t>(body["type_id"].is_null() ? 0 : body["type_id"].integer());
    if (type < last_type || type > 1) {
      body["type_id"].unsupported("token types must run 0 then 1 (two segments), got " + std::to_string(type) +
                                  " after " + std::to_string(last_type));
    }
    if (type == 1 && last_type == 0) {
      if (part != 1) body["type_id"].unsupported("token type 1 must begin after $A and no later than $B");
      t.pair_type1_from = static_cast<int32_t>(t.pair_between.size());
    }
    last_type = type;
    if (sequence) {
      const std::string id = body["id"].string();
      if ((id == "A" && part != 0) || (id == "B" && part != 1) || (id != "A" && id != "B")) {
        body["id"].unsupported("the pair template must hold $A, then $B, once each");
      }
      ++part;
      continue;
    }
    const int32_t special = template_special_id(specials, body);
    (part == 0 ? prefix : part == 1 ? t.pair_between : t.pair_after).push_back(special);
  }
  if (part != 2) pair.bad("the pair template must hold $A and $B");
  const std::vector<int32_t> single_prefix = t.prefix >= 0 ? std::vector<int32_t>{t.prefix} : std::vector<int32_t>{};
  if (prefix != single_prefix) pair.unsupported("the pair template must begin as the single one does");
  t.has_pair = true;
}

void parse_template(const JsonAt& at, Template& t) {
  parse_single_template(at, t);
  // A pair template Troupe cannot follow only leaves the tokenizer without
  // pairs (a cross-encoder's input): a generating model never joins two texts.
  try {
    parse_pair_template(at, t);
  } catch (const Error& e) {
    if (e.code() != Errc::unsupported) throw;
    t.has_pair = false;
    t.pair_between.clear();
    t.pair_after.clear();
    t.pair_type1_from = -1;
  }
}

// BertProcessing / RobertaProcessing name a token as ["[SEP]", 102].
int32_t processing_id(const JsonAt& at) {
  at.expect_array();
  if (at.size() != 2) at.bad("expected [token, id]");
  at[0].string();
  return id_of(at[1]);
}

Template parse_post_processor(const JsonAt& at) {
  Template t;
  if (at.is_null()) return t;
  at.expect_object();
  const std::string type = at["type"].string();
  if (type == "ByteLevel") return t;  // only offsets; the ids stay as they are
  if (type == "TemplateProcessing") {
    parse_template(at, t);
    return t;
  }
  // cls A sep for one text; BERT's pair: cls A sep B:1 sep:1, RoBERTa's:
  // cls A sep sep B sep, all of type 0. RoBERTa's trim_offsets and
  // add_prefix_space only move offsets.
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    t.prefix = processing_id(at["cls"]);
    t.suffix = processing_id(at["sep"]);
    t.has_pair = true;
    const bool bert = type == "BertProcessing";
    t.pair_between.assign(bert ? 1 : 2, t.suffix);
    t.pair_after = {t.suffix};
    t.pair_type1_from = bert ? 1 : -1;
    return t;
  }
  if (type == "Sequence") {
    const JsonAt list = at["processors"];
    list.expect_array();
    for (size_t i = 0; i < list.size(); ++i) {
      const Template inner = parse_post_processor(list[i]);
      if (inner.prefix >= 0 || inner.suffix >= 0) {
        if (t.prefix >= 0 || t.suffix >= 0) list[i].unsupported("a second TemplateProcessing is not supported");
        t = inner;
      }
    }
    return t;
  }
  at["type"].unsupported("post-processor '" + type +
                         "' is not supported; supported: TemplateProcessing, BertProcessing, RobertaProcessing, "
                         "ByteLevel, Sequence");
}

// "left right" (exactly one space) or ["left", "right"].
std::pair<std::string, std::string> merge_pair(const JsonAt& at) {
  if (at.is_array()) {
    if (at.size() != 2) at.bad("expected two tokens");
    return {at[0].string(), at[1].string()};
  }
  const std::string s = at.string();
  const size_t space = s.find(' ');
  if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
    at.bad("'" + s + "' is not two tokens split by one space");
  }
  return {s.substr(0, space), s.substr(space + 1)};
}

// Files older than "type" are BPE.
enum class ModelType { bpe, wordpiece, unigram };
ModelType model_type(const JsonAt& model) {
  model.expect_object();
  const JsonAt type = model["type"];
  const std::string name = type.is_null() ? "BPE" : type.string();
  if (name == "WordPiece") return ModelType::wordpiece;
  if (name == "Unigram") return ModelType::unigram;  // hf_json_unigram.cpp
  if (name != "BPE") type.unsupported("model '" + name + "' is not supported; supported: BPE, WordPiece, Unigram");
  return ModelType::bpe;
}

void check_bpe_model(const JsonAt& model) {
  const JsonAt dropout = model["dropout"];
  if (!dropout.is_null() && !(dropout.node().is_number() && dropout.node().get<double>() == 0.0)) {
    dropout.unsupported("BPE dropout is not supported (it makes encoding random)");
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const JsonAt a = model[affix];
    if (!a.is_null() && !a.string().empty()) a.unsupported("a non-empty " + std::string(affix) + " is not supported");
  }
}

// The BPE model's unk, switches and merges (in_model is left to the caller).
HfBpeModel parse_bpe_model(const JsonAt& model, const std::unordered_map<std::string, int32_t>& model_ids) {
  HfBpeModel m;
  const JsonAt unk = model["unk_token"];
  if (!unk.is_null()) {
    const auto it = model_ids.find(unk.string());
    if (it == model_ids.end()) unk.bad("'" + unk.string() + "' is not in model.vocab");
    m.unk_id = it->second;
  }
  m.byte_fallback = model.flag("byte_fallback", false);
  m.fuse_unk = model.flag("fuse_unk", false);
  m.ignore_merges = model.flag("ignore_merges", false);
  const JsonAt merges = model["merges"];
  if (!merges.is_null()) {
    merges.expect_array();
    if (merges.size() > kMaxMerges) {
      merges.bad("has " + std::to_string(merges.size()) + " merges, over the limit of " + std::to_string(kMaxMerges));
    }
    m.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const auto [left, right] = merge_pair(merges[i]);
      const auto l = model_ids.find(left);
      const auto r = model_ids.find(right);
      if (l == model_ids.end() || r == model_ids.end()) {
        merges[i].bad("'" + (l == model_ids.end() ? left : right) + "' is not in model.vocab");
      }
      m.merges.push_back({l->second, r->second});
    }
  }
  return m;
}

}  // namespace

std::unique_ptr<Tokenizer> build_tokenizer(const Json& root, const std::string& file, const SpecialNames& names) {
  const JsonAt top(root, file, "");
  top.expect_object();
  for (const char* key : {"truncation", "padding"}) {
    if (!top[key].is_null()) top[key].unsupported("is not supported (set it to null)");
  }
  const JsonAt model = top["model"];
  const ModelType type = model_type(model);
  const bool wordpiece = type == ModelType::wordpiece;
  const bool unigram = type == ModelType::unigram;
  if (type == ModelType::bpe) check_bpe_model(model);

  // Model vocab, then added tokens, into one id-indexed list.
  const JsonAt vocab_at = model["vocab"];
  std::unordered_map<std::string, int32_t> model_ids;
  int32_t n = unigram ? unigram_model_ids(vocab_at, model_ids) : 0;  // [[piece, score], ...]
  if (!unigram) vocab_at.expect_object();
  model_ids.reserve(vocab_at.size());
  for (auto it = vocab_at.node().begin(); !unigram && it != vocab_at.node().end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() >= INT32_MAX) {
      vocab_at[it.key()].bad("expected a token id");
    }
    const auto id = static_cast<int32_t>(it->get<int64_t>());
    model_ids.emplace(it.key(), id);
    n = std::max(n, id + 1);
  }
  const std::vector<AddedToken> added = parse_added_tokens(top["added_tokens"]);
  for (const AddedToken& a : added) n = std::max(n, a.id + 1);
  // Checked before the id-indexed lists are made: ids must be contiguous, so
  // one id of 2^31 - 2 in a small file cannot ask for gigabytes.
  if (n > kMaxVocab) {
    vocab_at.bad("has token id " + std::to_string(n - 1) + ", over the limit of " + std::to_string(kMaxVocab) +
                 " tokens");
  }
  if (static_cast<size_t>(n) > model_ids.size() + added.size()) {
    vocab_at.bad("token id " + std::to_string(n - 1) + " with only " +
                 std::to_string(model_ids.size() + added.size()) + " tokens (ids repeat or leave gaps)");
  }

  VocabData v;
  v.model = wordpiece ? "hf-wordpiece" : unigram ? "hf-unigram" : "hf-bpe";
  v.tokens.resize(static_cast<size_t>(n));
  v.token_types.assign(static_cast<size_t>(n), static_cast<int32_t>(TokenType::normal));
  std::vector<bool> in_model(static_cast<size_t>(n), false);
  std::vector<bool> filled(static_cast<size_t>(n), false);
  for (const auto& [text, id] : model_ids) {
    if (filled[static_cast<size_t>(id)]) vocab_at[text].bad("id " + std::to_string(id) + " is used twice");
    filled[static_cast<size_t>(id)] = true;
    v.tokens[static_cast<size_t>(id)] = text;
    in_model[static_cast<size_t>(id)] = true;
  }
  const bool has_normalizer = !top["normalizer"].is_null();
  bool any_normalized = false;
  bool any_raw = false;
  for (size_t i = 0; i < added.size(); ++i) {
    const AddedToken& a = added[i];
    const JsonAt at = top["added_tokens"][i];
    const auto i_id = static_cast<size_t>(a.id);
    if (filled[i_id] && v.tokens[i_id] != a.content) {
      at["id"].bad("id " + std::to_string(a.id) + " is '" + v.tokens[i_id] + "' in model.vocab, not '" +
                   a.content + "'");
    }
    if (const auto it = model_ids.find(a.content); it != model_ids.end() && it->second != a.id) {
      at["id"].bad("'" + a.content + "' is id " + std::to_string(it->second) + " in model.vocab");
    }
    filled[i_id] = true;
    v.tokens[i_id] = a.content;
    v.token_types[i_id] = static_cast<int32_t>(a.special ? TokenType::control : TokenType::user_defined);
    if (a.strip != 0) {
      v.added_strip.resize(static_cast<size_t>(n), 0);
      v.added_strip[i_id] = a.strip;
    }
    (a.normalized ? any_normalized : any_raw) = true;
    // Hugging Face matches normalized tokens in the normalized text, after
    // the others; only the case where that order cannot matter is supported.
    if (a.normalized && has_normalizer) {
      at["normalized"].unsupported("normalized added tokens with a normalizer are not supported");
    }
  }
  if (any_normalized && any_raw) {
    top["added_tokens"].unsupported("a mix of normalized and not normalized added tokens is not supported");
  }
  for (int32_t id = 0; id < n; ++id) {
    if (!filled[static_cast<size_t>(id)]) {
      vocab_at.unsupported("no token has id " + std::to_string(id) + "; ids must be contiguous");
    }
  }

  HfPipeline p;
  WordPiecePipeline wp;
  UnigramPipeline up;
  if (unigram) {
    up = parse_unigram_pipeline(top);
  } else if (wordpiece) {
    wp.model = parse_wordpiece_model(model, model_ids);
    wp.model.in_model = std::move(in_model);
    wp.normalizer = parse_normalizer(top["normalizer"]);
    wp.pre_tokenizer = parse_pre_tokenizer(top["pre_tokenizer"]);
    wp.decoder = parse_wordpiece_decoder(top["decoder"]);
  } else {
    p.model = parse_bpe_model(model, model_ids);
    p.model.in_model = std::move(in_model);
    p.normalizer = parse_normalizer(top["normalizer"]);
    p.pre_tokenizer = parse_pre_tokenizer(top["pre_tokenizer"]);
    p.decoder = parse_decoder(top["decoder"]);
  }
  const int32_t model_unk = wordpiece ? wp.model.unk_id : unigram ? up.model.unk_id : p.model.unk_id;

  // Special tokens: the post-processor's BOS/EOS, else tokenizer_config's.
  const Template t = parse_post_processor(top["post_processor"]);
  std::vector<int32_t> template_ids = {t.prefix, t.suffix};
  template_ids.insert(template_ids.end(), t.pair_between.begin(), t.pair_between.end());
  template_ids.insert(template_ids.end(), t.pair_after.begin(), t.pair_after.end());
  for (const int32_t id : template_ids) {
    if (id >= n) top["post_processor"].bad("token id " + std::to_string(id) + " is outside the vocabulary");
  }
  v.has_pair = t.has_pair;
  v.pair_between = t.pair_between;
  v.pair_after = t.pair_after;
  v.pair_type1_from = t.pair_type1_from;
  auto named = [&](const std::string& text) {
    if (text.empty()) return -1;
    for (const AddedToken& a : added) {
      if (a.content == text) return a.id;
    }
    const auto it = model_ids.find(text);
    if (it == model_ids.end()) {
      throw Error(Errc::bad_format, "tokenizer_config.json: special token '" + text + "' is not in " + file);
    }
    return it->second;
  };
  v.bos_id = t.prefix >= 0 ? t.prefix : named(names.bos);
  v.add_bos = t.prefix >= 0;
  v.eos_id = named(names.eos);
  if (t.suffix >= 0) {
    if (v.eos_id >= 0 && v.eos_id != t.suffix) {
      top["post_processor"].unsupported("it appends '" + v.tokens[static_cast<size_t>(t.suffix)] +
                                        "' but tokenizer_config.json's eos_token is '" + names.eos + "'");
    }
    v.eos_id = t.suffix;
    v.add_eos = true;
  }
  v.unk_id = model_unk >= 0 ? model_unk : named(names.unk);
  v.pad_id = named(names.pad);
  if (v.unk_id >= 0 && v.token_types[static_cast<size_t>(v.unk_id)] == static_cast<int32_t>(TokenType::control)) {
    v.token_types[static_cast<size_t>(v.unk_id)] = static_cast<int32_t>(TokenType::unknown);
  }
  if (wordpiece) return std::make_unique<WordPieceTokenizer>(std::move(v), std::move(wp));
  if (unigram) return std::make_unique<UnigramTokenizer>(std::move(v), std::move(up));
  return std::make_unique<HfBpeTokenizer>(std::move(v), std::move(p));
}

}  // namespace troupe::hf
