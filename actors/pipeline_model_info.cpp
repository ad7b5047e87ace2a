// ModelInfo from the model, its tokenizer and the stage plan.
#include "actors/pipeline_model_info.hpp"

#include "core/error.hpp"
#include "grammar/tool_calls.hpp"
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
  // Each stage's pages (a remote stage's worker allocates the same shape
  // and KV type for its layers); recurrent state slots are per sequence,
  // not per token, and are left out.
  for (const PlannedStage& s : plan) {
    info.kv_bytes_per_token += stage_kv_token_bytes(mc, s.first_layer, s.last_layer, config.kv_type);
  }
  const EmbeddingSpec embedding = pipeline_embedding(config, mc);
  info.pooling = embedding.pooling;
  info.normalize = embedding.normalize;
  info.n_embd = static_cast<int32_t>(mc.n_embd);
  info.encoder = !mc.causal;
  info.n_labels = mc.n_labels;
  info.score_sigmoid = embedding.score_sigmoid;
  info.labels = mc.labels;
  info.multi_label = mc.multi_label;
  info.two_segments = mc.n_token_types >= 2;
  info.rerank_template = mc.rerank_template;
  return info;
}

bool embeds_by_default(const ModelConfig& model) {
  // An encoder has no way to generate; a classifier's head has replaced
  // the LM head.
  return model.embedding.pooling != Pooling::none || !model.causal || model.n_labels > 0;
}

EmbeddingSpec pipeline_embedding(const PipelineConfig& config, const ModelConfig& model) {
  const EmbeddingSpec& declared = model.embedding;
  // An encoder or a classifier embeds (scores), whatever its files declare.
  const bool on = config.embedding.value_or(embeds_by_default(model));
  if (!on && !model.causal) {
    throw Error(Errc::unsupported, "PipelineConfig: " + model.name +
                                       " is an encoder, and generates no text; run it for embeddings (embedding on)");
  }
  if (!on && model.n_labels > 0) {
    throw Error(Errc::unsupported, "PipelineConfig: " + model.name +
                                       " is a sequence classifier, and generates no text; run it for scores "
                                       "(embedding on)");
  }
  if (!on) {
    if (!config.pooling.empty()) {
      throw Error(Errc::invalid_argument, "PipelineConfig: pooling '" + config.pooling +
                                              "' is for an embedding pipeline, and this one generates (embedding off)");
    }
    return {.pooling = Pooling::none, .normalize = declared.normalize};
  }
  // Undeclared: a causal model's last token, an encoder's [CLS] (as vLLM
  // pools a BERT without sentence-transformers files).
  const Pooling fallback = model.causal ? Pooling::last : Pooling::cls;
  if (model.n_labels > 0) {
    // A cross-encoder's head reads the [CLS] row, a causal classifier's the
    // last token's (the one that has seen the whole input): its scores, as
    // they are.
    const Pooling head_row = model.causal ? Pooling::last : Pooling::cls;
    if (!config.pooling.empty() && config.pooling != to_string(head_row)) {
      throw Error(Errc::invalid_argument, "PipelineConfig: " + model.name +
                                              " is a sequence classifier, whose head reads the " +
                                              (model.causal ? "last token's row" : "[CLS] row") + "; pooling '" +
                                              config.pooling + "' does not apply");
    }
    return {.pooling = head_row, .normalize = false, .score_sigmoid = declared.score_sigmoid};
  }
  EmbeddingSpec spec{.pooling = declared.pooling != Pooling::none ? declared.pooling : fallback,
                     .normalize = declared.normalize};
  if (!config.pooling.empty()) {
    const std::optional<Pooling> p = parse_pooling(config.pooling);
    if (!p || *p == Pooling::none) {
      throw Error(Errc::invalid_argument, "PipelineConfig: pooling '" + config.pooling + "' is not last, mean or cls");
    }
    spec.pooling = *p;
  }
  check_model_pooling(spec.pooling, model.causal, "PipelineConfig: pooling of " + model.name);
  return spec;
}

void set_answer_syntax(ModelInfo& info, const ChatPrompter& prompter, const PipelineConfig& config) {
  info.tool_call_syntax = grammar::detect_tool_call_syntax(prompter.source());
  if (!config.tool_call_parser.empty()) {
    const std::optional<grammar::ToolCallSyntax> named = grammar::tool_call_syntax_named(config.tool_call_parser);
    if (!named) {
      throw Error(Errc::invalid_argument, "PipelineConfig: tool_call_parser '" + config.tool_call_parser +
                                              "' is not one of hermes, llama3_json, mistral, json");
    }
    info.tool_call_syntax = *named;
  }
  // gpt-oss's template writes harmony messages; its reasoning is a channel.
  const std::string& source = prompter.source();
  info.harmony = source.find("<|channel|>") != std::string::npos && source.find("<|message|>") != std::string::npos;
  const std::string& rf = config.reasoning_format;
  if (!rf.empty() && rf != "auto" && rf != "deepseek" && rf != "none") {
    throw Error(Errc::invalid_argument,
                "PipelineConfig: reasoning_format '" + rf + "' is not one of auto, deepseek, none");
  }
  info.reasoning_tags = !info.harmony && (rf == "deepseek" || ((rf.empty() || rf == "auto") &&
                                                                source.find("</think>") != std::string::npos));
  if (!info.reasoning_tags) return;
  // Does the template open the block itself? Its generation prompt for a
  // one-line conversation says so.
  try {
    ChatRenderInput probe;
    probe.messages.push_back(
        ChatMessage{.role = "user", .content = "Hi", .tool_calls = {}, .extra = nlohmann::ordered_json::object()});
    probe.add_generation_prompt = true;
    std::string text = prompter.render(std::move(probe));
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    info.reasoning_starts_open = text.ends_with("<think>");
  } catch (const Error&) {
    // A template that refuses so small a conversation: the output is read
    // as it comes (a block it opens itself).
  }
}

}  // namespace troupe
