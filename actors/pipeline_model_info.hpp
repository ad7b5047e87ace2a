// The facts Pipeline::model_info() publishes, computed once at start.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/pipeline.hpp"
#include "model/stage_plan.hpp"
#include "tokenizer/chat_prompter.hpp"

namespace troupe {

// context_length: the scheduler's, already capped at the trained context
// and at the KV pool.
ModelInfo pipeline_model_info(const Model& model, const Tokenizer& tok, const std::vector<PlannedStage>& plan,
                              int32_t context_length, const PipelineConfig& config);

// What the pipeline embeds with: pooling none for a generating pipeline;
// else the config's pooling, or the model's declared one (last when it
// declares none), and the model's normalization. Throws
// Error(invalid_argument) for an unknown pooling name, or a pooling asked of
// a generating pipeline.
EmbeddingSpec pipeline_embedding(const PipelineConfig& config, const ModelConfig& model);
// Whether a model embeds or scores unless told otherwise: it declares a
// pooling, is an encoder, or is a classifier (its head replaced the LM's).
bool embeds_by_default(const ModelConfig& model);

// How the model's chat answers are read: its tool-call syntax and its
// <think> blocks, from the chat template in use unless the config names
// them (tool_call_parser, reasoning_format). Throws Error(invalid_argument)
// for a name that is none of the known ones.
void set_answer_syntax(ModelInfo& info, const ChatPrompter& prompter, const PipelineConfig& config);

}  // namespace troupe
