#include "actors/pipeline_vision.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/device.hpp"

namespace troupe {

namespace {

// A GGUF text model of a vision-language model (LLaVA's <image>, Gemma 3's
// <start_of_image>): what llama.cpp's users serve with an mmproj beside it.
bool mmproj_would_fit(const Model& model) {
  if (!model.path().ends_with(".gguf")) return false;
  const std::vector<std::string>& tokens = model.vocab().tokens;
  return std::find(tokens.begin(), tokens.end(), "<start_of_image>") != tokens.end() ||
         std::find(tokens.begin(), tokens.end(), "<image>") != tokens.end();
}

}  // namespace

PipelineVision open_pipeline_vision(const Model& model, const PipelineConfig& config, int threads, ModelInfo& info) {
  if (!config.vision || (model.path().empty() && config.mmproj.empty())) return {};
  PipelineVision out{.model = config.mmproj.empty() ? vision::VisionModel::load(model.path())
                                                    : vision::VisionModel::load_mmproj(config.mmproj, model.vocab())};
  if (!out.model) {
    if (const std::string why = vision::VisionModel::unsupported_reason(model.path()); !why.empty()) {
      std::fprintf(stderr, "troupe: %s\n", why.c_str());
    } else if (mmproj_would_fit(model)) {
      std::fprintf(stderr,
                   "troupe: %s has image tokens in its vocabulary but reads text only: llama.cpp's mmproj file "
                   "of its vision tower (--mmproj FILE) gives it images\n",
                   model.path().c_str());
    }
    return {};
  }
  const vision::VisionConfig& c = out.model->config();
  const ModelConfig& mc = model.config();
  if (c.text_embd != mc.n_embd || c.image_token < 0 || c.image_token >= mc.n_vocab) {
    throw Error(Errc::bad_format, "PipelineConfig: " + (config.mmproj.empty() ? model.path() : config.mmproj) +
                                      ": the projector's output (" + std::to_string(c.text_embd) +
                                      ") or the image token (" + std::to_string(c.image_token) +
                                      ") does not fit the text model (n_embd " + std::to_string(mc.n_embd) + ", " +
                                      std::to_string(mc.n_vocab) + " tokens)");
  }
  try {
    out.backend = open_backend(parse_device(config.vision_device), threads);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("PipelineConfig: vision_device: ") + e.what());
  }
  for (const int32_t t : {c.image_begin, c.image_end}) {
    if (t >= mc.n_vocab) {
      throw Error(Errc::bad_format, "PipelineConfig: " + model.path() + ": the image's begin or end token " +
                                        std::to_string(t) + " is outside the text model's " +
                                        std::to_string(mc.n_vocab) + " tokens");
    }
  }
  info.image_token = c.image_token;
  info.image_tokens = c.image_tokens();
  info.image_begin = c.image_begin;
  info.image_end = c.image_end;
  info.image_open = c.open_attention;
  return out;
}

}  // namespace troupe
