// tokenizer.json's normalizer, pre_tokenizer and decoder sections -> the
// pipeline parts of hf_normalizer.hpp, hf_pre_tokenizer.hpp and HfDecoder
// (BPE and Unigram models).
// Anything else is Error(unsupported) naming its JSON path.
#include <memory>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "tokenizer/hf_json.hpp"
#include "tokenizer/precompiled_charsmap.hpp"
#include "tokenizer/regex.hpp"

namespace troupe::hf {
namespace {

const Json& null_json() {
  static const Json null;
  return null;
}

// "file: path", how errors name a place.
std::string place_of(const JsonAt& at) { return at.file() + ": " + at.path(); }

std::string type_of(const JsonAt& at) {
  at.expect_object();
  return at["type"].string();
}

// Hugging Face patterns: {"String": "..."} or {"Regex": "..."}.
std::string pattern_of(const JsonAt& at, bool& regex) {
  at.expect_object();
  if (!at["String"].is_null()) {
    regex = false;
    return at["String"].string();
  }
  if (!at["Regex"].is_null()) {
    regex = true;
    return at["Regex"].string();
  }
  at.bad("expected {\"String\": ...} or {\"Regex\": ...}");
}

void add_normalizers(const JsonAt& at, std::vector<NormalizerStep>& steps) {
  if (at.is_null()) return;
  const std::string type = type_of(at);
  using K = NormalizerStep::Kind;
  if (type == "Sequence") {
    const JsonAt list = at["normalizers"];
    list.expect_array();
    for (size_t i = 0; i < list.size(); ++i) add_normalizers(list[i], steps);
  } else if (type == "NFC") {
    steps.push_back({.kind = K::nfc});
  } else if (type == "NFD") {
    steps.push_back({.kind = K::nfd});
  } else if (type == "NFKC") {
    steps.push_back({.kind = K::nfkc});
  } else if (type == "NFKD") {
    steps.push_back({.kind = K::nfkd});
  } else if (type == "Prepend") {
    steps.push_back({.kind = K::prepend, .content = at["prepend"].string()});
  } else if (type == "Replace") {
    bool regex = false;
    std::string pattern = pattern_of(at["pattern"], regex);
    std::shared_ptr<const Regex> compiled;
    if (regex) compiled = std::make_shared<const Regex>(pattern, place_of(at["pattern"]), Errc::unsupported);
    steps.push_back({.kind = K::replace,
                     .pattern = std::move(pattern),
                     .content = at["content"].string(),
                     .regex = std::move(compiled)});
  } else if (type == "Precompiled") {
    const JsonAt map = at["precompiled_charsmap"];
    const std::optional<std::string> blob = decode_base64(map.string());
    if (!blob) map.bad("not valid base64");
    steps.push_back(
        {.kind = K::precompiled, .charsmap = std::make_shared<const PrecompiledCharsmap>(*blob, place_of(map))});
  } else if (type == "BertNormalizer") {
    // strip_accents null (or absent) follows lowercase, as in the original BERT.
    const bool lower = at.flag("lowercase", true);
    steps.push_back({.kind = K::bert,
                     .bert = {.clean_text = at.flag("clean_text", true),
                              .handle_chinese_chars = at.flag("handle_chinese_chars", true),
                              .strip_accents = at.flag("strip_accents", lower),
                              .lowercase = lower}});
  } else if (type == "Lowercase") {
    steps.push_back({.kind = K::lowercase});
  } else if (type == "StripAccents") {
    steps.push_back({.kind = K::strip_accents});
  } else if (type == "Strip") {
    steps.push_back(
        {.kind = K::strip, .strip_left = at.flag("strip_left", true), .strip_right = at.flag("strip_right", true)});
  } else {
    at["type"].unsupported("normalizer '" + type +
                           "' is not supported; supported: NFC, NFD, NFKC, NFKD, Prepend, Replace, BertNormalizer, "
                           "Lowercase, StripAccents, Strip, Precompiled, Sequence");
  }
}

SplitBehavior behavior_of(const JsonAt& at) {
  const std::string b = at.string();
  if (b == "Isolated") return SplitBehavior::isolated;
  if (b == "Removed") return SplitBehavior::removed;
  if (b == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (b == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (b == "Contiguous") return SplitBehavior::contiguous;
  at.bad("unknown split behavior '" + b + "'");
}

// Metaspace's scheme; files older than prepend_scheme say add_prefix_space.
PrependScheme prepend_scheme_of(const JsonAt& at) {
  const JsonAt scheme = at["prepend_scheme"];
  if (scheme.is_null()) return at.flag("add_prefix_space", true) ? PrependScheme::always : PrependScheme::never;
  const std::string s = scheme.string();
  if (s == "first") return PrependScheme::first;
  if (s == "always") return PrependScheme::always;
  if (s == "never") return PrependScheme::never;
  scheme.bad("unknown prepend_scheme '" + s + "'");
}

std::string replacement_of(const JsonAt& at) {
  std::string r = at["replacement"].string();
  if (r.empty()) at["replacement"].bad("empty replacement character");
  return r;
}

void add_pre_tokenizers(const JsonAt& at, std::vector<PreTokenizerStep>& steps, std::vector<std::string>& where) {
  if (at.is_null()) return;
  const std::string type = type_of(at);
  if (type == "Sequence") {
    const JsonAt list = at["pretokenizers"];
    list.expect_array();
    for (size_t i = 0; i < list.size(); ++i) add_pre_tokenizers(list[i], steps, where);
    return;
  } else if (type == "Split") {
    SplitStep s;
    s.pattern = pattern_of(at["pattern"], s.regex);
    s.behavior = behavior_of(at["behavior"]);
    s.invert = at.flag("invert", false);
    steps.emplace_back(std::move(s));
  } else if (type == "ByteLevel") {
    // Hugging Face's ByteLevel defaults: prefix space on, GPT-2's regex on.
    steps.emplace_back(ByteLevelStep{.add_prefix_space = at.flag("add_prefix_space", true),
                                     .use_regex = at.flag("use_regex", true)});
  } else if (type == "Metaspace") {
    steps.emplace_back(MetaspaceStep{.replacement = replacement_of(at),
                                     .prepend_scheme = prepend_scheme_of(at),
                                     .split = at.flag("split", true)});
  } else if (type == "Digits") {
    steps.emplace_back(DigitsStep{.individual_digits = at.flag("individual_digits", false)});
  } else if (type == "BertPreTokenizer") {
    steps.emplace_back(CharClassStep{.kind = CharClassStep::Kind::bert});
  } else if (type == "WhitespaceSplit") {
    steps.emplace_back(CharClassStep{.kind = CharClassStep::Kind::whitespace_split});
  } else if (type == "Punctuation") {
    const JsonAt behavior = at["behavior"];
    steps.emplace_back(CharClassStep{.kind = CharClassStep::Kind::punctuation,
                                     .behavior = behavior.is_null() ? SplitBehavior::isolated : behavior_of(behavior)});
  } else if (type == "Whitespace") {
    steps.emplace_back(
        SplitStep{.pattern = kWhitespacePattern, .regex = true, .behavior = SplitBehavior::removed, .invert = true});
  } else {
    at["type"].unsupported("pre-tokenizer '" + type +
                           "' is not supported; supported: Split, ByteLevel, Metaspace, Digits, BertPreTokenizer, "
                           "Whitespace, WhitespaceSplit, Punctuation, Sequence");
  }
  where.push_back(at.file() + ": " + at.path());
}

// True if pattern occurs in some "<0xNN>" token text: a Replace before
// ByteFallback would then change which tokens count as bytes.
bool touches_byte_tokens(std::string_view pattern) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const std::string t = std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
    if (t.find(pattern) != std::string::npos) return true;
  }
  return false;
}

void add_decoder(const JsonAt& at, size_t count, HfDecoder& d, bool& fallback, bool& fuse,
                 bool& strip) {
  const std::string type = type_of(at);
  if (strip) at.unsupported("a decoder after Strip is not supported");
  if (type == "ByteLevel") {
    if (count != 1) at.unsupported("ByteLevel is supported only as the whole decoder");
    d.byte_level = true;
  } else if (type == "Replace") {
    bool regex = false;
    std::string from = pattern_of(at["pattern"], regex);
    if (regex) at["pattern"].unsupported("Replace with a Regex pattern is not supported; only {\"String\": ...}");
    if (fuse) at.unsupported("Replace after Fuse is not supported");
    HfDecoder::Replace r{.from = std::move(from), .to = at["content"].string()};
    if (fallback) d.after.push_back(std::move(r));
    else d.before.push_back(std::move(r));
  } else if (type == "Metaspace") {
    if (fuse) at.unsupported("Metaspace after Fuse is not supported");
    d.after.push_back({.from = replacement_of(at), .to = " ",
                       .drop_when_opening = prepend_scheme_of(at) != PrependScheme::never});
  } else if (type == "ByteFallback") {
    if (fallback || fuse || !d.after.empty()) {
      at.unsupported("ByteFallback after Metaspace, Fuse or another ByteFallback is not supported");
    }
    for (const HfDecoder::Replace& r : d.before) {
      if (touches_byte_tokens(r.from)) {
        at.unsupported("a Replace of '" + r.from + "' before ByteFallback would change <0xNN> tokens");
      }
    }
    fallback = true;
    d.byte_fallback = true;
  } else if (type == "Fuse") {
    fuse = true;
  } else if (type == "Strip") {
    const std::string content = at["content"].string();
    const int64_t start = at["start"].integer();
    const int64_t stop = at["stop"].integer();
    // After Fuse the text is one string: Strip then trims its start.
    if (!fuse) at.unsupported("Strip before Fuse (on every token) is not supported");
    if (content != " " || start > 1 || stop != 0) {
      at.unsupported("only Strip(content \" \", start 0 or 1, stop 0) is supported");
    }
    d.strip_leading_space = start == 1;
    strip = true;
  } else {
    at["type"].unsupported("decoder '" + type + "' is not supported; supported: ByteLevel, Metaspace, "
                                                "and a Sequence of Replace, ByteFallback, Fuse, Strip, Metaspace");
  }
}

}  // namespace

JsonAt JsonAt::operator[](const std::string& key) const {
  const std::string path = path_.empty() ? key : path_ + "." + key;
  if (!node_->is_object()) return JsonAt(null_json(), *file_, path);
  const auto it = node_->find(key);
  return JsonAt(it == node_->end() ? null_json() : *it, *file_, path);
}

JsonAt JsonAt::operator[](size_t index) const {
  const std::string path = path_ + "[" + std::to_string(index) + "]";
  if (!node_->is_array() || index >= node_->size()) return JsonAt(null_json(), *file_, path);
  return JsonAt((*node_)[index], *file_, path);
}

void JsonAt::bad(const std::string& what) const {
  throw Error(Errc::bad_format, *file_ + ": " + (path_.empty() ? "(top level)" : path_) + ": " + what);
}

void JsonAt::unsupported(const std::string& what) const {
  throw Error(Errc::unsupported, *file_ + ": " + (path_.empty() ? "(top level)" : path_) + ": " + what);
}

std::string JsonAt::string() const {
  if (!node_->is_string()) bad(node_->is_null() ? "missing; expected a string" : "expected a string");
  return node_->get<std::string>();
}

bool JsonAt::boolean() const {
  if (!node_->is_boolean()) bad(node_->is_null() ? "missing; expected true or false" : "expected true or false");
  return node_->get<bool>();
}

int64_t JsonAt::integer() const {
  if (!node_->is_number_integer()) bad(node_->is_null() ? "missing; expected an integer" : "expected an integer");
  return node_->get<int64_t>();
}

bool JsonAt::flag(const std::string& key, bool fallback) const {
  const JsonAt v = (*this)[key];
  return v.is_null() ? fallback : v.boolean();
}

void JsonAt::expect_object() const {
  if (!node_->is_object()) bad(node_->is_null() ? "missing; expected an object" : "expected an object");
}

void JsonAt::expect_array() const {
  if (!node_->is_array()) bad(node_->is_null() ? "missing; expected an array" : "expected an array");
}

Json parse_json(std::string_view text, const std::string& file) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {  // also out_of_range: a number past a double (1e99999)
    throw Error(Errc::bad_format, file + ": not valid JSON: " + e.what());
  }
}

Normalizer parse_normalizer(const JsonAt& at) {
  std::vector<NormalizerStep> steps;
  add_normalizers(at, steps);
  return Normalizer(std::move(steps));
}

PreTokenizer parse_pre_tokenizer(const JsonAt& at) {
  std::vector<PreTokenizerStep> steps;
  std::vector<std::string> where;
  add_pre_tokenizers(at, steps, where);
  return PreTokenizer(std::move(steps), std::move(where));
}

HfDecoder parse_decoder(const JsonAt& at) {
  if (at.is_null()) at.unsupported("no decoder (Hugging Face would join tokens with spaces) is not supported");
  HfDecoder d;
  bool fallback = false;
  bool fuse = false;
  bool strip = false;
  if (type_of(at) == "Sequence") {
    const JsonAt list = at["decoders"];
    list.expect_array();
    for (size_t i = 0; i < list.size(); ++i) add_decoder(list[i], list.size(), d, fallback, fuse, strip);
  } else {
    add_decoder(at, 1, d, fallback, fuse, strip);
  }
  return d;
}

Normalizer Normalizer::from_json(std::string_view json_text) {
  const std::string file = "normalizer JSON";
  const Json j = parse_json(json_text, file);
  return parse_normalizer(JsonAt(j, file, "normalizer"));
}

PreTokenizer PreTokenizer::from_json(std::string_view json_text) {
  const std::string file = "pre-tokenizer JSON";
  const Json j = parse_json(json_text, file);
  return parse_pre_tokenizer(JsonAt(j, file, "pre_tokenizer"));
}

}  // namespace troupe::hf
