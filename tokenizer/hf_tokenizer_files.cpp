// A Hugging Face tokenizer folder -> Tokenizer + HfTokenizerConfig: which
// files to read, tokenizer_config.json's special tokens and chat templates
// (chat_template.jinja first, as transformers), and GPT-2's original
// encoder.json + vocab.bpe, read as the same BPE pipeline tokenizer.json
// would spell it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "tokenizer/hf_json.hpp"
#include "tokenizer/hf_tokenizer.hpp"

namespace troupe {
namespace {

namespace fs = std::filesystem;
using hf::Json;
using hf::JsonAt;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, path.string() + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw Error(Errc::io, path.string() + ": read failed");
  return s.str();
}

// A special token in tokenizer_config.json: a string, an AddedToken object
// ({"content": ...}) or null.
std::string token_text(const JsonAt& at) {
  if (at.is_null()) return {};
  if (at.is_object()) return at["content"].string();
  return at.string();
}

struct RawConfig {
  hf::SpecialNames names;
  HfTokenizerConfig config;  // the parts that need no vocab
};

RawConfig read_config(const fs::path& path) {
  RawConfig raw;
  if (!fs::exists(path)) return raw;
  const std::string file = path.string();
  const Json root = hf::parse_json(read_file(path), file);
  const JsonAt top(root, file, "");
  top.expect_object();
  raw.names = {.bos = token_text(top["bos_token"]), .eos = token_text(top["eos_token"]),
               .unk = token_text(top["unk_token"]), .pad = token_text(top["pad_token"])};
  HfTokenizerConfig& c = raw.config;
  if (!top["add_bos_token"].is_null()) c.add_bos_token = top["add_bos_token"].boolean();
  if (!top["add_eos_token"].is_null()) c.add_eos_token = top["add_eos_token"].boolean();
  const JsonAt extra = top["additional_special_tokens"];
  if (!extra.is_null()) {
    extra.expect_array();
    for (size_t i = 0; i < extra.size(); ++i) c.additional_special_tokens.push_back(token_text(extra[i]));
  }
  const JsonAt tmpl = top["chat_template"];
  if (tmpl.is_array()) {
    // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
    for (size_t i = 0; i < tmpl.size(); ++i) c.chat_templates[tmpl[i]["name"].string()] = tmpl[i]["template"].string();
  } else if (!tmpl.is_null()) {
    c.chat_templates["default"] = tmpl.string();
  }
  return raw;
}

// chat_template.jinja and additional_chat_templates/<name>.jinja replace the
// config's templates when present (transformers gives them priority).
void read_template_files(const fs::path& dir, HfTokenizerConfig& c) {
  std::map<std::string, std::string> found;
  if (fs::exists(dir / "chat_template.jinja")) found["default"] = read_file(dir / "chat_template.jinja");
  const fs::path extra = dir / "additional_chat_templates";
  if (fs::is_directory(extra)) {
    for (const auto& entry : fs::directory_iterator(extra)) {
      if (entry.path().extension() == ".jinja") found[entry.path().stem().string()] = read_file(entry.path());
    }
  }
  if (!found.empty()) c.chat_templates = std::move(found);
  const auto it = c.chat_templates.find("default");
  c.chat_template = it == c.chat_templates.end() ? std::string() : it->second;
}

// GPT-2 as OpenAI published it: encoder.json (token -> id) and vocab.bpe
// ("#version" line, then one "left right" merge per line), byte-level with
// GPT-2's regex, <|endoftext|> special.
Json gpt2_as_tokenizer_json(const fs::path& vocab_path, const fs::path& merges_path) {
  Json root;
  root["model"] = {{"type", "BPE"}, {"vocab", hf::parse_json(read_file(vocab_path), vocab_path.string())}};
  Json merges = Json::array();
  std::istringstream lines(read_file(merges_path));
  std::string line;
  for (size_t n = 1; std::getline(lines, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (n == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      throw Error(Errc::bad_format, merges_path.string() + ": line " + std::to_string(n) +
                                        " is not two tokens split by one space");
    }
    merges.push_back(line);
  }
  root["model"]["merges"] = std::move(merges);
  root["added_tokens"] = Json::array();
  const Json& vocab = root["model"]["vocab"];
  if (const auto it = vocab.find("<|endoftext|>"); it != vocab.end() && it->is_number_integer()) {
    root["added_tokens"].push_back({{"id", *it}, {"content", "<|endoftext|>"}, {"special", true}});
  }
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  root["post_processor"] = nullptr;
  root["decoder"] = {{"type", "ByteLevel"}};
  return root;
}

void fill_ids(const Tokenizer& t, HfTokenizerConfig& c) {
  auto id = [&](const std::string& text) { return text.empty() ? -1 : t.find_token(text); };
  c.bos_id = id(c.bos_token);
  c.eos_id = id(c.eos_token);
  c.unk_id = id(c.unk_token);
  c.pad_id = id(c.pad_token);
  c.add_bos = t.vocab().add_bos;
  c.add_eos = t.vocab().add_eos;
}

}  // namespace

HfTokenizer load_hf_tokenizer_files(const std::string& dir) {
  const fs::path folder(dir);
  if (!fs::is_directory(folder)) throw Error(Errc::io, dir + ": not a directory");
  RawConfig raw = read_config(folder / "tokenizer_config.json");
  HfTokenizer out;
  if (fs::exists(folder / "tokenizer.json")) {
    const std::string file = (folder / "tokenizer.json").string();
    const Json root = hf::parse_json(read_file(folder / "tokenizer.json"), file);
    out.tokenizer = hf::build_tokenizer(root, file, raw.names);
  } else {
    fs::path vocab = folder / "encoder.json";
    fs::path merges = folder / "vocab.bpe";
    if (!fs::exists(vocab) || !fs::exists(merges)) {
      vocab = folder / "vocab.json";
      merges = folder / "merges.txt";
    }
    if (!fs::exists(vocab) || !fs::exists(merges)) {
      throw Error(Errc::io, dir + ": no tokenizer.json, encoder.json + vocab.bpe, or vocab.json + merges.txt");
    }
    // transformers' GPT2Tokenizer: <|endoftext|> is BOS, EOS and unk.
    for (std::string* name : {&raw.names.bos, &raw.names.eos, &raw.names.unk}) {
      if (name->empty()) *name = "<|endoftext|>";
    }
    const Json root = gpt2_as_tokenizer_json(vocab, merges);
    out.tokenizer = hf::build_tokenizer(root, vocab.string() + " + " + merges.filename().string(), raw.names);
  }
  out.config = std::move(raw.config);
  out.config.bos_token = raw.names.bos;
  out.config.eos_token = raw.names.eos;
  out.config.unk_token = raw.names.unk;
  out.config.pad_token = raw.names.pad;
  read_template_files(folder, out.config);
  fill_ids(*out.tokenizer, out.config);
  return out;
}

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& dir) { return load_hf_tokenizer_files(dir).tokenizer; }

std::unique_ptr<Tokenizer> tokenizer_from_hf_json(std::string_view json_text, const std::string& file_name) {
  const Json root = hf::parse_json(json_text, file_name);
  return hf::build_tokenizer(root, file_name, {});
}

}  // namespace troupe
