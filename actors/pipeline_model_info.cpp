// ModelInfo from the model, its tokenizer and the stage plan.
#include "actors/pipeline_model_info.hpp"

#include "model/model_identity.hpp"

namespace troupe {
namespace {

// A vocab entry's text ("<s>", "<|im_end|>"), as chat templates see it.
std::string token_text(const Tokenizer& tok, int32_t id) {
  const auto& tokens = tok.vocab().tokens;
  return id >= 0 && static_cast<size_t>(id) < tokens.size() ? tokens[static_cast<size_t>(id)] : std::string();
}

}  // namespace

ModelInfo pipeline_model_info(const Model& model, const Tokenizer& tok, const std::vector<PlannedStage>& plan,
                              int32_t context_length, const PipelineConfig& config) {
  const ModelConfig& mc = model.config();
  ModelInfo info{.name = model_display_name(model),
                 .context_length = context_length,
                 .n_vocab = static_cast<int32_t>(mc.n_vocab),
                 .n_layer = static_cast<int32_t>(mc.n_layer),
                 .bos = tok.bos(),
                 .eos = tok.eos(),
                 .bos_text = token_text(tok, tok.bos()),
                 .eos_text = token_text(tok, tok.eos()),
                 .has_chat_template = !model.chat_template().empty(),
                 .kv_block_size = config.kv_block_size,
                 .n_kv_blocks = config.n_kv_blocks};
  // Each stage's pages as it allocates them; a remote stage's worker
  // allocates the same shape and KV type for its layers.
  const int64_t tokens = static_cast<int64_t>(config.n_kv_blocks) * config.kv_block_size;
  for (const PlannedStage& s : plan) {
    if (!s.is_remote() && tokens > 0) {
      info.kv_bytes_per_token += static_cast<int64_t>(s.footprint.kv_bytes) / tokens;
    } else {
      info.kv_bytes_per_token += stage_kv_token_bytes(mc, s.first_layer, s.last_layer, config.kv_type);
    }
  }
  return info;
}


}  // namespace troupe
