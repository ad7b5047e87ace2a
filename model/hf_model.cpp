// Model::load for Hugging Face directories: config.json picks the
// architecture, whose loader reads the hyperparameters and binds the
// safetensors tensors (mapped in place, or converted into the model's store).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_quantization.hpp"
#include "model/hf_weights.hpp"
#include "model/model_loaders.hpp"
#include "model/pooling.hpp"
#include "model/safetensors.hpp"
#include "model/sequence_classifier.hpp"
#include "tokenizer/chat_template.hpp"

namespace troupe {
namespace {

// config.json names its token ids as an integer, a list (Llama 3 has three
// end tokens: the first is EOS) or null.
int32_t token_id(const HfConfig& cfg, const char* key) {
  if (!cfg.has(key)) return -1;
  const nlohmann::json& v = cfg.json()[key];
  const nlohmann::json& id = v.is_array() && !v.empty() ? v[0] : v;
  if (!id.is_number_integer()) cfg.fail(Errc::bad_format, std::string("key '") + key + "' is not a token id");
  return id.get<int32_t>();
}

class HfModel final : public Model {
 public:
  void load(const std::string& dir, const ModelLoadOptions& options);

 private:
  safetensors::Checkpoint checkpoint_;  // the mappings the weights point into
};

// The directory's chat template, as transformers picks it: chat_template.jinja
// first, then tokenizer_config.json's "chat_template"; "" when it has none.
std::string read_chat_template(const std::string& dir) {
  namespace fs = std::filesystem;
  if (const fs::path jinja = fs::path(dir) / "chat_template.jinja"; fs::exists(jinja)) {
    std::ifstream in(jinja, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const fs::path config = fs::path(dir) / "tokenizer_config.json";
  if (!fs::exists(config)) return {};
  std::ifstream in(config, std::ios::binary);
  nlohmann::ordered_json json;
  try {
    json = nlohmann::ordered_json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(Errc::bad_format, config.string() + ": " + e.what());
  }
  if (!json.contains("chat_template")) return {};
  return chat_template_from_config(json);
}

void HfModel::load(const std::string& dir, const ModelLoadOptions& options) {
  namespace fs = std::filesystem;
  path_ = dir;
  const HfConfig cfg = HfConfig::load((fs::path(dir) / "config.json").string());
  if (!cfg.has("architectures") || !cfg.json()["architectures"].is_array()) {
    cfg.fail(Errc::bad_format, "no 'architectures' list");
  }
  const Architecture* arch = nullptr;
  std::string listed;
  for (const nlohmann::json& a : cfg.json()["architectures"]) {
    if (!a.is_string()) cfg.fail(Errc::bad_format, "'architectures' holds a non-string");
    listed += (listed.empty() ? "" : ", ") + a.get<std::string>();
    if (arch == nullptr) arch = find_hf_architecture(a.get<std::string>());
    // A checkpoint saved from the base model class (sentence-transformers
    // saves Qwen3Model, e5-mistral ships MistralModel): the causal LM's
    // layers, without its head.
    const std::string name = a.get<std::string>();
    if (arch == nullptr && name.ends_with("Model")) {
      arch = find_hf_architecture(name.substr(0, name.size() - 5) + "ForCausalLM");
    }
    // A causal LM with a classifier head in place of its LM head (reward
    // models, "-seq-cls" rerankers): the LM's layers, then `score`.
    constexpr std::string_view kSeqCls = "ForSequenceClassification";
    if (arch == nullptr && name.ends_with(kSeqCls)) {
      arch = find_hf_architecture(name.substr(0, name.size() - kSeqCls.size()) + "ForCausalLM");
    }
  }
  if (arch == nullptr) {
    cfg.fail(Errc::unsupported, "architectures [" + listed + "] are not supported; supported: " +
                                    supported_hf_architectures());
  }

  const std::optional<HfQuantScheme> quantization = read_quantization_config(cfg);
  checkpoint_ = safetensors::Checkpoint::open_dir(dir);
  const EmbeddingSpec embedding = read_sentence_transformers(dir);
  HfWeights src(checkpoint_, store_);
  if (quantization) src.set_quantization(*quantization);
  LoraSet lora = LoraSet::read(options.lora, /*hf_base=*/true, "", store_);
  if (!lora.empty()) src.set_lora(&lora);
  src.set_embedding_model(embedding.pooling != Pooling::none || names_sequence_classifier(cfg));
  arch->load_hf(cfg, src, config_, weights_);
  bind_hf_causal_classifier(dir, cfg, src, options, config_, weights_, store_);
  config_.embedding = embedding;
  check_model_pooling(embedding.pooling, config_.causal, dir);
  config_.name = fs::path(dir).filename().string();
  if (config_.name.empty()) config_.name = fs::path(dir).parent_path().filename().string();

  select_longrope(config_, options.context_length);
  if (options.quantize) quantize_weights(weights_, config_, *options.quantize, store_, dir);
  lora.finish(weights_);
  weight_bytes_ = decode_weight_bytes(weights_, config_);
  // The tokenizer files fill the rest of the vocabulary; these ids let a
  // generator stop at EOS even without them.
  vocab_.bos_id = token_id(cfg, "bos_token_id");
  vocab_.eos_id = token_id(cfg, "eos_token_id");
  vocab_.pad_id = token_id(cfg, "pad_token_id");
  chat_template_ = read_chat_template(dir);
}

}  // namespace

std::shared_ptr<const Model> load_hf_model(const std::string& dir, const ModelLoadOptions& options) {
  auto model = std::make_shared<HfModel>();
  model->load(dir, options);
  return model;
}

}  // namespace troupe
