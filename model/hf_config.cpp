// config.json access and the shared readers: Llama-family hyperparameters,
// RoPE settings in both transformers spellings.
#include "model/hf_config.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "model/rope_scaling.hpp"

namespace troupe {

namespace {
// The largest sizes a config.json may give (docs/models.md).
constexpr int64_t kMaxLayers = 1024, kMaxWidth = int64_t{1} << 20, kMaxVocab = int64_t{1} << 22;
}  // namespace

using Json = nlohmann::json;

HfConfig::HfConfig(Json j, std::string path) : json_(std::move(j)), path_(std::move(path)) {
  if (!json_.is_object()) fail(Errc::bad_format, "not a JSON object");
}

HfConfig HfConfig::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(Errc::io, path + ": cannot open");
  try {
    return HfConfig(Json::parse(in), path);
  } catch (const Json::exception& e) {  // also out_of_range: a number past a double (1e99999)
    throw Error(Errc::bad_format, path + ": not valid JSON: " + e.what());
  }
}

void HfConfig::fail(Errc code, const std::string& what) const { throw Error(code, path_ + ": " + what); }

const Json* HfConfig::find(std::string_view key) const {
  auto it = json_.find(key);
  return it == json_.end() || it->is_null() ? nullptr : &*it;
}

bool HfConfig::has(std::string_view key) const { return find(key) != nullptr; }

int64_t HfConfig::get_int(std::string_view key) const {
  const Json* v = find(key);
  if (v == nullptr) fail(Errc::bad_format, "missing key '" + std::string(key) + "'");
  if (!v->is_number_integer()) fail(Errc::bad_format, "key '" + std::string(key) + "' is not an integer");
  return v->get<int64_t>();
}

int64_t HfConfig::get_int(std::string_view key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double HfConfig::get_float(std::string_view key) const {
  const Json* v = find(key);
  if (v == nullptr) fail(Errc::bad_format, "missing key '" + std::string(key) + "'");
  if (!v->is_number()) fail(Errc::bad_format, "key '" + std::string(key) + "' is not a number");
  return v->get<double>();
}

double HfConfig::get_float(std::string_view key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

bool HfConfig::get_bool(std::string_view key, bool fallback) const {
  const Json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(Errc::bad_format, "key '" + std::string(key) + "' is not a boolean");
  return v->get<bool>();
}

std::string HfConfig::get_string(std::string_view key, const std::string& fallback) const {
  const Json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) fail(Errc::bad_format, "key '" + std::string(key) + "' is not a string");
  return v->get<std::string>();
}

void read_encoder_sizes(const HfConfig& cfg, ModelConfig& c) {
  c.causal = false;
  c.n_vocab = cfg.get_int("vocab_size");
  c.n_embd = cfg.get_int("hidden_size");
  c.n_layer = cfg.get_int("num_hidden_layers");
  c.n_head = cfg.get_int("num_attention_heads");
  c.n_head_kv = c.n_head;
  if (c.n_head <= 0 || c.n_embd % c.n_head != 0) {
    cfg.fail(Errc::bad_format, "hidden_size is not a multiple of num_attention_heads");
  }
  c.head_dim = c.n_embd / c.n_head;
  c.n_ff = cfg.get_int("intermediate_size");
  c.n_ctx_train = cfg.get_int("max_position_embeddings");
  if (c.n_ctx_train <= 0) cfg.fail(Errc::bad_format, "max_position_embeddings must be positive");
  c.tied_output = false;
}

void read_gpt2_sizes(const HfConfig& cfg, ModelConfig& c) {
  c.n_vocab = cfg.get_int("vocab_size");
  c.n_embd = cfg.get_int("n_embd");
  c.n_layer = cfg.get_int("n_layer");
  c.n_head = cfg.get_int("n_head");
  c.n_head_kv = c.n_head;
  if (c.n_head <= 0 || c.n_embd % c.n_head != 0) cfg.fail(Errc::bad_format, "n_embd is not a multiple of n_head");
  c.head_dim = c.n_embd / c.n_head;
  c.n_ff = cfg.get_int("n_inner", 4 * c.n_embd);  // null: 4 * n_embd
  c.norm_eps = static_cast<float>(cfg.get_float("layer_norm_epsilon", 1e-5));
}

void check_config(const HfConfig& cfg, const ModelConfig& c) {
  if (c.n_vocab <= 0 || c.n_embd <= 0 || c.n_layer <= 0 || c.n_head <= 0 || c.n_head_kv <= 0 || c.n_ff <= 0 ||
      c.head_dim <= 0) {
    cfg.fail(Errc::bad_format, "vocabulary, hidden, FFN, layer, head and head_dim sizes must all be positive");
  }
  // Upper bounds (docs/models.md), checked before anything is sized by
  // them: the layer list is made before the tensors that would otherwise
  // bound these are looked up.
  if (c.n_layer > kMaxLayers || c.n_embd > kMaxWidth || c.n_ff > kMaxWidth || c.head_dim > kMaxWidth ||
      c.n_head > kMaxWidth || c.n_vocab > kMaxVocab) {
    cfg.fail(Errc::bad_format, "sizes over the limits: at most " + std::to_string(kMaxLayers) + " layers, " +
                                   std::to_string(kMaxVocab) + " tokens and " + std::to_string(kMaxWidth) +
                                   " for the hidden, FFN and head sizes and head count");
  }
  if (c.n_head % c.n_head_kv != 0) {
    cfg.fail(Errc::bad_format, "num_attention_heads " + std::to_string(c.n_head) +
                                   " is not a multiple of num_key_value_heads " + std::to_string(c.n_head_kv));
  }
  if (c.n_rot < 0 || c.n_rot > c.head_dim || c.n_rot % 2 != 0) {
    cfg.fail(Errc::bad_format, "rotary dimensions " + std::to_string(c.n_rot) + " must be even and at most head_dim " +
                                   std::to_string(c.head_dim));
  }
  if (c.n_expert < 0 || c.n_expert_used < 0 || c.n_expert_used > c.n_expert) {
    cfg.fail(Errc::bad_format, "experts per token " + std::to_string(c.n_expert_used) + " must be at most the " +
                                   std::to_string(c.n_expert) + " experts");
  }
}

namespace {

// One LongRoPE factor list: n_rot / 2 positive numbers.
std::vector<float> longrope_factors(const HfConfig& rope, const ModelConfig& c, const char* key) {
  const Json* list = rope.has(key) ? &rope.json()[key] : nullptr;
  if (list == nullptr || !list->is_array()) {
    rope.fail(Errc::bad_format, std::string("longrope needs a list '") + key + "'");
  }
  if (static_cast<int64_t>(list->size()) != c.n_rot / 2) {
    rope.fail(Errc::bad_format, std::string("'") + key + "' has " + std::to_string(list->size()) +
                                    " factors; the rotary dimensions need " + std::to_string(c.n_rot / 2));
  }
  std::vector<float> out;
  for (const Json& v : *list) {
    if (!v.is_number() || !(v.get<double>() > 0.0) || !std::isfinite(v.get<double>())) {
      rope.fail(Errc::bad_format, std::string("'") + key + "' holds a factor that is not a positive number");
    }
    out.push_back(static_cast<float>(v.get<double>()));
  }
  return out;
}

// LongRoPE, as transformers' _compute_longrope_parameters reads it: the
// attention factor given, or sqrt(1 + ln(factor) / ln(original)) with
// factor = max_position_embeddings / original when not given.
void read_longrope(const HfConfig& cfg, const HfConfig& rope, ModelConfig& c) {
  c.rope_long_factors = longrope_factors(rope, c, "long_factor");
  c.rope_short_factors = longrope_factors(rope, c, "short_factor");
  c.rope_orig_ctx =
      rope.get_int("original_max_position_embeddings", cfg.get_int("original_max_position_embeddings", 0));
  if (c.rope_orig_ctx <= 0) rope.fail(Errc::bad_format, "longrope needs a positive original_max_position_embeddings");
  double factor = rope.get_float("factor", 0.0);
  if (factor == 0.0) factor = static_cast<double>(cfg.get_int("max_position_embeddings")) / c.rope_orig_ctx;
  if (!(factor > 0.0)) rope.fail(Errc::bad_format, "rope scaling factor must be positive");
  const double mscale =
      rope.get_float("attention_factor",
                     factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(double(c.rope_orig_ctx))));
  if (!(mscale > 0.0) || !std::isfinite(mscale)) rope.fail(Errc::bad_format, "attention_factor must be positive");
  c.rope_mscale = static_cast<float>(mscale);
  c.rope_freq_factors = c.rope_short_factors;  // until select_longrope knows the context
}

// YaRN, as transformers' _compute_yarn_parameters reads it: a static
// blend of kept and divided frequencies, and the attention factor given or
// derived from factor (and DeepSeek's mscale / mscale_all_dim).
void read_yarn(const HfConfig& cfg, const HfConfig& rope, ModelConfig& c) {
  YarnParams p;
  p.original_ctx = static_cast<double>(rope.get_int(
      "original_max_position_embeddings",
      cfg.get_int("original_max_position_embeddings", cfg.get_int("max_position_embeddings", 0))));
  if (!(p.original_ctx > 0.0)) rope.fail(Errc::bad_format, "yarn needs a positive original_max_position_embeddings");
  p.factor = rope.get_float("factor", 0.0);
  if (p.factor == 0.0) p.factor = static_cast<double>(cfg.get_int("max_position_embeddings")) / p.original_ctx;
  if (!(p.factor > 0.0)) rope.fail(Errc::bad_format, "rope scaling factor must be positive");
  // transformers reads these with `or`: null and 0 take the defaults.
  if (const double v = rope.get_float("beta_fast", 0.0); v != 0.0) p.beta_fast = v;
  if (const double v = rope.get_float("beta_slow", 0.0); v != 0.0) p.beta_slow = v;
  if (!(p.beta_fast > 0.0) || !(p.beta_slow > 0.0)) {
    rope.fail(Errc::bad_format, "beta_fast and beta_slow must be positive");
  }
  p.truncate = rope.get_bool("truncate", true);
  c.rope_freq_factors = yarn_freq_factors(c.n_rot, c.rope_theta, p);
  double mscale = rope.get_float("attention_factor", 0.0);
  if (mscale == 0.0) {
    const double m = rope.get_float("mscale", 0.0), m_all = rope.get_float("mscale_all_dim", 0.0);
    mscale = m != 0.0 && m_all != 0.0 ? yarn_mscale(p.factor, m) / yarn_mscale(p.factor, m_all) : yarn_mscale(p.factor);
  }
  if (!(mscale > 0.0) || !std::isfinite(mscale)) rope.fail(Errc::bad_format, "attention_factor must be positive");
  c.rope_mscale = static_cast<float>(mscale);
}

}  // namespace

void read_rope_config(const HfConfig& cfg, ModelConfig& c) {
  // The RoPE tables are sized by head_dim before check_config runs.
  if (c.head_dim <= 0 || c.head_dim > kMaxWidth) {
    cfg.fail(Errc::bad_format, "head_dim " + std::to_string(c.head_dim) + " must be in [1, " +
                                   std::to_string(kMaxWidth) + "]");
  }
  // transformers 5 writes one "rope_parameters" object; older files (most
  // published checkpoints) have "rope_theta" and an optional "rope_scaling".
  Json params = Json::object();
  if (cfg.has("rope_parameters")) {
    params = cfg.json()["rope_parameters"];
    if (!params.is_object()) cfg.fail(Errc::bad_format, "'rope_parameters' is not an object");
  } else if (cfg.has("rope_scaling")) {
    params = cfg.json()["rope_scaling"];
    if (!params.is_object()) cfg.fail(Errc::bad_format, "'rope_scaling' is not an object");
  }
  const HfConfig rope(params, cfg.path() + " (rope settings)");
  const std::string type = rope.get_string("rope_type", rope.get_string("type", "default"));
  c.rope_theta = static_cast<float>(rope.get_float("rope_theta", cfg.get_float("rope_theta", 10000.0)));
  if (!(c.rope_theta > 0.0f)) cfg.fail(Errc::bad_format, "rope_theta must be positive");
  const double partial = rope.get_float("partial_rotary_factor", cfg.get_float("partial_rotary_factor", 1.0));
  if (!(partial > 0.0 && partial <= 1.0)) cfg.fail(Errc::bad_format, "partial_rotary_factor must be in (0, 1]");
  c.n_rot = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  if (c.n_rot <= 0) cfg.fail(Errc::bad_format, "partial_rotary_factor leaves no rotary dimensions");
  c.rope_layout = kernels::RopeLayout::neox;
  c.rope_freq_scale = 1.0f;
  c.rope_freq_factors.clear();
  c.rope_long_factors.clear();
  c.rope_short_factors.clear();
  c.rope_orig_ctx = 0;
  c.rope_mscale = 1.0f;

  if (type == "default") return;
  if (type == "longrope" || type == "su") {  // "su": the name in the first Phi-3 128k configs
    read_longrope(cfg, rope, c);
    return;
  }
  if (type == "yarn") {
    read_yarn(cfg, rope, c);
    return;
  }
  const double factor = rope.get_float("factor");
  if (!(factor > 0.0)) rope.fail(Errc::bad_format, "rope scaling factor must be positive");
  if (type == "linear") {
    c.rope_freq_scale = static_cast<float>(1.0 / factor);
  } else if (type == "llama3") {
    const double low = rope.get_float("low_freq_factor");
    const double high = rope.get_float("high_freq_factor");
    const double original = rope.get_float("original_max_position_embeddings");
    if (!(low > 0.0) || !(high > low) || !(original > 0.0)) {
      rope.fail(Errc::bad_format, "llama3 rope scaling needs 0 < low_freq_factor < high_freq_factor and a positive "
                                  "original_max_position_embeddings");
    }
    c.rope_freq_factors = llama3_freq_factors(c.n_rot, c.rope_theta, factor, low, high, original);
  } else {
    rope.fail(Errc::unsupported,
              "rope type '" + type + "' is not supported; supported: default, linear, llama3, longrope, yarn");
  }
}

void read_decoder_sizes(const HfConfig& cfg, ModelConfig& c) {
  c.n_vocab = cfg.get_int("vocab_size");
  c.n_embd = cfg.get_int("hidden_size");
  c.n_ff = cfg.get_int("intermediate_size");
  c.n_layer = cfg.get_int("num_hidden_layers");
  c.n_head = cfg.get_int("num_attention_heads");
  c.n_head_kv = cfg.get_int("num_key_value_heads", c.n_head);
  if (c.n_head <= 0) cfg.fail(Errc::bad_format, "num_attention_heads must be positive");
  if (!cfg.has("head_dim") && c.n_embd % c.n_head != 0) {
    cfg.fail(Errc::bad_format, "hidden_size is not a multiple of num_attention_heads and head_dim is not given");
  }
  c.head_dim = cfg.get_int("head_dim", c.n_embd / c.n_head);
  c.norm_eps = static_cast<float>(cfg.get_float("rms_norm_eps"));
  c.n_ctx_train = cfg.get_int("max_position_embeddings", 0);
  c.tied_output = cfg.get_bool("tie_word_embeddings", false);
}

void read_llama_config(const HfConfig& cfg, ModelConfig& c) {
  read_decoder_sizes(cfg, c);
  const std::string act = cfg.get_string("hidden_act", "silu");
  if (act != "silu") cfg.fail(Errc::unsupported, "hidden_act '" + act + "' is not supported; supported: silu");
  if (cfg.get_bool("mlp_bias", false)) cfg.fail(Errc::unsupported, "mlp_bias is not supported");
  read_rope_config(cfg, c);
}

HfConfig text_config_of(const HfConfig& cfg) {
  if (!cfg.has("text_config") || !cfg.json()["text_config"].is_object()) {
    cfg.fail(Errc::bad_format, "'text_config' is missing or not an object");
  }
  Json text = cfg.json()["text_config"];
  if (cfg.has("tie_word_embeddings")) text["tie_word_embeddings"] = cfg.json()["tie_word_embeddings"];
  return HfConfig(std::move(text), cfg.path() + " (text_config)");
}

std::vector<std::string> read_layer_types(const HfConfig& cfg, int64_t n_layer,
                                          std::initializer_list<std::string_view> allowed) {
  if (!cfg.has("layer_types") || cfg.json()["layer_types"].is_null()) return {};
  const Json& types = cfg.json()["layer_types"];
  if (!types.is_array() || static_cast<int64_t>(types.size()) != n_layer) {
    cfg.fail(Errc::bad_format, "layer_types must list num_hidden_layers layer types");
  }
  std::vector<std::string> out;
  for (const Json& j : types) {
    std::string t = j.is_string() ? j.get<std::string>() : "";
    if (std::find(allowed.begin(), allowed.end(), t) == allowed.end()) {
      std::string names;
      for (const std::string_view a : allowed) names += (names.empty() ? "" : ", ") + std::string(a);
      cfg.fail(Errc::unsupported, "layer type '" + t + "' is not supported; supported: " + names);
    }
    out.push_back(std::move(t));
  }
  return out;
}

void read_layer_kinds(const HfConfig& cfg, ModelConfig& c, int64_t default_pattern) {
  c.local_layers.assign(static_cast<size_t>(c.n_layer), 0);
  if (cfg.has("layer_types") && !cfg.json()["layer_types"].is_null()) {
    const std::vector<std::string> types = read_layer_types(cfg, c.n_layer, {"sliding_attention", "full_attention"});
    for (size_t i = 0; i < types.size(); ++i) c.local_layers[i] = types[i] == "sliding_attention" ? 1 : 0;
  } else {
    const int64_t pattern = cfg.get_int("sliding_window_pattern", default_pattern);
    if (pattern <= 0) cfg.fail(Errc::bad_format, "sliding_window_pattern must be positive");
    for (int64_t il = 0; il < c.n_layer; ++il) c.local_layers[static_cast<size_t>(il)] = (il + 1) % pattern != 0;
  }
  const int64_t window = cfg.get_int("sliding_window");
  if (window <= 0 || window > INT32_MAX) cfg.fail(Errc::bad_format, "sliding_window must be positive");
  c.sliding_window = static_cast<int32_t>(window);
}

void read_layer_kind_rope(const HfConfig& cfg, ModelConfig& c, std::optional<double> legacy_local_theta) {
  const Json& params = cfg.has("rope_parameters") ? cfg.json()["rope_parameters"] : Json();
  if (!params.is_object() || !params.contains("full_attention")) {
    read_rope_config(cfg, c);
    c.rope_local_theta = static_cast<float>(legacy_local_theta.value_or(c.rope_theta));
  } else {
    Json global = cfg.json();
    global["rope_parameters"] = params["full_attention"];
    read_rope_config(HfConfig(global, cfg.path()), c);
    Json local = cfg.json();
    local["rope_parameters"] = params.contains("sliding_attention") ? params["sliding_attention"] : Json::object();
    ModelConfig lc = c;
    read_rope_config(HfConfig(local, cfg.path()), lc);
    if (lc.rope_freq_scale != 1.0f || !lc.rope_freq_factors.empty() || lc.n_rot != c.n_rot || lc.rope_mscale != 1.0f) {
      cfg.fail(Errc::unsupported, "scaled or partial RoPE on sliding_attention layers is not supported");
    }
    c.rope_local_theta = lc.rope_theta;
  }
  if (!(c.rope_local_theta > 0.0f)) cfg.fail(Errc::bad_format, "the local layers' RoPE base must be positive");
}

void read_deepseek_moe_config(const HfConfig& cfg, ModelConfig& c, ModelConfig::ExpertRouter router) {
  c.n_ff = cfg.get_int("moe_intermediate_size");
  c.n_expert = cfg.get_int("n_routed_experts");
  c.n_expert_used = cfg.get_int("num_experts_per_tok");
  if (c.n_ff <= 0 || c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
    cfg.fail(Errc::bad_format, "moe_intermediate_size, n_routed_experts and num_experts_per_tok (at most "
                               "n_routed_experts) must be positive");
  }
  c.expert_router = router;
  // DeepSeek-V2's router never renormalizes (transformers ignores the key).
  c.expert_weights_norm = router == ModelConfig::ExpertRouter::deepseek_sigmoid && cfg.get_bool("norm_topk_prob", true);
  c.expert_weights_scale = static_cast<float>(cfg.get_float("routed_scaling_factor", 1.0));
  if (!(c.expert_weights_scale > 0.0f) || !std::isfinite(c.expert_weights_scale)) {
    cfg.fail(Errc::bad_format, "routed_scaling_factor must be positive");
  }
  c.n_expert_groups = cfg.get_int("n_group", 1);
  c.n_expert_groups_used = cfg.get_int("topk_group", 1);
  if (c.n_expert_groups <= 0 || c.n_expert % c.n_expert_groups != 0 || c.n_expert_groups_used <= 0 ||
      c.n_expert_groups_used > c.n_expert_groups ||
      (c.n_expert_groups > 1 && c.n_expert / c.n_expert_groups < 2) ||
      c.n_expert_groups_used * (c.n_expert / c.n_expert_groups) < c.n_expert_used) {
    cfg.fail(Errc::bad_format, "n_group must divide n_routed_experts into groups of 2 or more, and topk_group "
                               "(at most n_group) must keep num_experts_per_tok experts");
  }
  const int64_t n_shared = cfg.get_int("n_shared_experts", 1);
  if (n_shared < 0) cfg.fail(Errc::bad_format, "n_shared_experts must not be negative");
  c.n_ff_shared = n_shared * c.n_ff;
}

}  // namespace troupe
