#include "model/pooling.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace troupe {
namespace {

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::bad_format, path.string() + ": cannot be read");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(Errc::bad_format, path.string() + ": " + e.what());
  }
}

bool flag(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// The Pooling module's config: one mode (the boolean per mode of
// sentence-transformers 2-4, or a "pooling_mode" string).
Pooling read_pooling_module(const std::filesystem::path& config) {
  const nlohmann::json j = read_json(config);
  if (!j.is_object()) throw Error(Errc::bad_format, config.string() + ": not a JSON object");
  if (j.contains("include_prompt") && !flag(j, "include_prompt")) {
    throw Error(Errc::unsupported, config.string() +
                                       ": pooling that leaves out the prompt (include_prompt false) "
                                       "is not supported");
  }
  std::vector<std::string> modes;
  if (const auto it = j.find("pooling_mode"); it != j.end() && it->is_string()) modes.push_back(*it);
  static constexpr std::pair<const char*, const char*> kFlags[] = {
      {"pooling_mode_cls_token", "cls"},
      {"pooling_mode_mean_tokens", "mean"},
      {"pooling_mode_max_tokens", "max"},
      {"pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len_tokens"},
      {"pooling_mode_weightedmean_tokens", "weightedmean"},
      {"pooling_mode_lasttoken", "lasttoken"}};
  for (const auto& [key, mode] : kFlags) {
    if (flag(j, key)) modes.emplace_back(mode);
  }
  if (modes.size() != 1) {
    throw Error(modes.empty() ? Errc::bad_format : Errc::unsupported,
                config.string() + (modes.empty() ? ": names no pooling mode" : ": more than one pooling mode at once"));
  }
  if (modes[0] == "lasttoken") return Pooling::last;
  if (modes[0] == "mean") return Pooling::mean;
  if (modes[0] == "cls") return Pooling::cls;
  throw Error(Errc::unsupported, config.string() + ": pooling mode '" + modes[0] +
                                     "' is not supported (Troupe pools by the last token, the mean or CLS)");
}

// A CrossEncoder's activation_fn (config_sentence_transformers.json from
// sentence-transformers 4, config.json's "sentence_transformers" before):
// true for Sigmoid or none named (the default for one label), false for
// Identity.
bool read_score_sigmoid(const std::filesystem::path& dir) {
  std::string name;
  const std::filesystem::path file = dir / "config_sentence_transformers.json";
  for (const auto& [path, section] : {std::pair{file, ""}, std::pair{dir / "config.json", "sentence_transformers"}}) {
    if (!std::filesystem::exists(path)) continue;
    nlohmann::json j = read_json(path);
    if (*section != '\0') j = j.is_object() && j.contains(section) ? j[section] : nlohmann::json();
    if (const auto it = j.is_object() ? j.find("activation_fn") : j.end(); j.is_object() && it != j.end()) {
      if (!it->is_string()) throw Error(Errc::bad_format, path.string() + ": activation_fn is not a string");
      name = *it;
      break;
    }
  }
  if (name.empty() || name.ends_with(".Sigmoid")) return true;
  if (name.ends_with(".Identity")) return false;
  throw Error(Errc::unsupported, dir.string() + ": a cross-encoder's activation_fn '" + name +
                                     "' is not supported (Troupe applies Sigmoid or Identity)");
}

bool is_cross_encoder(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "config_sentence_transformers.json";
  if (!std::filesystem::exists(file)) return false;
  const nlohmann::json j = read_json(file);
  return j.is_object() && j.value("model_type", std::string()) == "CrossEncoder";
}

}  // namespace

const char* to_string(Pooling p) {
  switch (p) {
    case Pooling::none:
      return "none";
    case Pooling::last:
      return "last";
    case Pooling::mean:
      return "mean";
    case Pooling::cls:
      return "cls";
  }
  return "?";
}

std::optional<Pooling> parse_pooling(std::string_view name) {
  for (const Pooling p : {Pooling::none, Pooling::last, Pooling::mean, Pooling::cls}) {
    if (name == to_string(p)) return p;
  }
  return std::nullopt;
}

EmbeddingSpec read_sentence_transformers(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path modules_path = fs::path(dir) / "modules.json";
  if (!fs::exists(modules_path))
    return {.pooling = Pooling::none, .normalize = true, .score_sigmoid = read_score_sigmoid(dir)};
  const nlohmann::json modules = read_json(modules_path);
  if (!modules.is_array()) throw Error(Errc::bad_format, modules_path.string() + ": not a JSON array");
  EmbeddingSpec spec{.pooling = Pooling::none, .normalize = false};
  bool has_transformer = false;
  for (const nlohmann::json& m : modules) {
    const auto type = m.find("type");
    if (!m.is_object() || type == m.end() || !type->is_string()) {
      throw Error(Errc::bad_format, modules_path.string() + ": a module without a 'type'");
    }
    const std::string t = *type;
    const std::string kind = t.substr(t.rfind('.') + 1);
    const auto path = m.find("path");
    const std::string sub = path != m.end() && path->is_string() ? path->get<std::string>() : "";
    if (kind == "Transformer") {
      has_transformer = true;
    } else if (kind == "Pooling") {
      spec.pooling = read_pooling_module(fs::path(dir) / sub / "config.json");
    } else if (kind == "Normalize") {
      spec.normalize = true;
    } else {
      throw Error(Errc::unsupported, modules_path.string() + ": sentence-transformers module '" + t +
                                         "' is not supported (Troupe runs Transformer, Pooling and Normalize)");
    }
  }
  // A CrossEncoder's Transformer module holds the classifier: no pooling module.
  if (has_transformer && spec.pooling == Pooling::none && modules.size() == 1 && is_cross_encoder(dir)) {
    return {.pooling = Pooling::none, .normalize = false, .score_sigmoid = read_score_sigmoid(dir)};
  }
  if (!has_transformer || spec.pooling == Pooling::none) {
    throw Error(Errc::unsupported, modules_path.string() + ": Troupe needs a Transformer and a Pooling module");
  }
  return spec;
}

Pooling gguf_pooling(uint32_t pooling_type, const std::string& file) {
  switch (pooling_type) {
    case 0:
      return Pooling::none;
    case 1:
      return Pooling::mean;
    case 2:
      return Pooling::cls;
    case 3:
      return Pooling::last;
    case 4:
      throw Error(Errc::unsupported, file +
                                         ": pooling_type rank (a reranker) is supported for BERT-family encoders "
                                         "with a classifier head only");
    default:
      throw Error(Errc::bad_format, file + ": pooling_type " + std::to_string(pooling_type) + " is not one of 0-4");
  }
}

void check_model_pooling(Pooling pooling, bool causal, const std::string& what) {
  if (pooling != Pooling::cls || !causal) return;
  throw Error(Errc::unsupported, what + ": CLS pooling needs an encoder; in a causal model the first token has seen "
                                        "only itself (pool by last or mean)");
}

EmbeddingPooler::EmbeddingPooler(Pooling pooling, bool normalize, int32_t dims, int32_t n_prompt)
    : pooling_(pooling), normalize_(normalize), dims_(dims), n_prompt_(n_prompt) {
  if (pooling == Pooling::none) throw Error(Errc::invalid_argument, "EmbeddingPooler: no pooling");
  if (n_prompt < 1) throw Error(Errc::invalid_argument, "EmbeddingPooler: an empty sequence has no embedding");
}

bool EmbeddingPooler::add(std::span<const float> row, int32_t pos) {
  if (pooling_ == Pooling::mean) {
    if (pos == 0) {  // the first row, or a preempted sequence's recompute
      n_rows_ = 0;
      sum_.assign(row.size(), 0.0);
    }
    if (sum_.size() != row.size()) throw Error(Errc::internal, "EmbeddingPooler: rows of different widths");
    for (size_t i = 0; i < row.size(); ++i) sum_[i] += row[i];
    ++n_rows_;
  }
  if (pooling_ == Pooling::cls && pos == 0) kept_.assign(row.begin(), row.end());
  if (pos != n_prompt_ - 1) return false;
  if (pooling_ == Pooling::last) kept_.assign(row.begin(), row.end());
  if (pooling_ == Pooling::mean && n_rows_ != n_prompt_) {
    throw Error(Errc::internal, "EmbeddingPooler: mean pooling saw " + std::to_string(n_rows_) + " of " +
                                    std::to_string(n_prompt_) + " rows");
  }
  return true;
}

std::vector<float> EmbeddingPooler::result() const {
  std::vector<float> v;
  if (pooling_ != Pooling::mean) {
    v = kept_;
  } else {
    v.resize(sum_.size());
    for (size_t i = 0; i < sum_.size(); ++i) v[i] = static_cast<float>(sum_[i] / n_rows_);
  }
  if (dims_ > 0 && static_cast<size_t>(dims_) < v.size()) v.resize(static_cast<size_t>(dims_));
  if (normalize_) {
    // torch.nn.functional.normalize: x / max(||x||, 1e-12).
    double norm = 0.0;
    for (const float x : v) norm += static_cast<double>(x) * x;
    const double scale = 1.0 / std::max(std::sqrt(norm), 1e-12);
    for (float& x : v) x = static_cast<float>(x * scale);
  }
  return v;
}

}  // namespace troupe
