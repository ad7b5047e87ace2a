// A vision-language model through the whole pipeline: chats with images
// (tests/fixtures/hf/llava_* and gemma3_vision, made by tools/fixtures/
// make_llava_models.py and make_gemma3_vision_model.py, and the same models
// as llama.cpp's GGUF and mmproj files in tests/fixtures/gguf_vision/) give
// transformers' prompt ids and greedy tokens (Gemma 3's with each image's tokens seeing
// the whole image, in chunks that never end inside an image); the prefix cache shares an
// image's KV only with the same image; every bad image or misplaced image
// token ends its request alone, naming the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <nlohmann/json.hpp>

#include "actors/pipeline.hpp"
#include "stage_process.hpp"
#include "tests/exact_math.hpp"
#include "tests/vision/llava_fixture.hpp"
#include "vision/image.hpp"

namespace troupe {
namespace {

using test::hf_fixture;
using test::hf_reference;
using test::llava_images;

// A fixture's conversation as the OpenAI route reads it (net/request_parser):
// image parts become {"type": "image"} in the turn's content parts, their
// bytes the chat's images. `images[i]` replaces the fixture's image i.
EngineRequest chat(const nlohmann::json& messages, const std::vector<std::string>& images) {
  ChatPrompt c;
  for (size_t m = 0; m < messages.size(); ++m) {
    const nlohmann::json& msg = messages[m];
    ChatTurn t{.role = msg["role"]};
    nlohmann::json parts = nlohmann::json::array();
    bool any_image = false;
    for (size_t j = 0; j < msg["content"].size(); ++j) {
      const nlohmann::json& p = msg["content"][j];
      if (p["type"] == "image") {
        c.images.push_back(
            {.bytes = images.at(p["image"].get<size_t>()),
             .param = "messages[" + std::to_string(m) + "].content[" + std::to_string(j) + "].image_url"});
        parts.push_back({{"type", "image"}});
        any_image = true;
      } else {
        t.content += p["text"].get<std::string>();
        parts.push_back(p);
      }
    }
    if (any_image) t.fields_json = nlohmann::json{{"content", parts}}.dump();
    c.messages.push_back(std::move(t));
  }
  GenerateParams params;
  params.max_new_tokens = 12;
  params.sampling.temperature = 0.0f;
  params.ignore_eos = true;
  params.sampling.logprobs = true;
  EngineRequest r = EngineRequest::from_chat(std::move(c), params);
  r.return_prompt = true;
  return r;
}

struct Outcome {
  std::vector<int32_t> prompt;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // of each token
  FinalEvent final;
};

Outcome run(Pipeline& p, EngineRequest r) {
  auto done = std::make_shared<std::promise<Outcome>>();
  auto out = std::make_shared<Outcome>();
  p.submit(std::move(r), {.on_token =
                              [out](const TokenEvent& e) {
                                out->tokens.push_back(e.token);
                                out->logprobs.push_back(e.logprob);
                              },
                          .on_final =
                              [out, done](const FinalEvent& f) {
                                out->final = f;
                                done->set_value(*out);
                              },
                          .on_prompt = [out](const PromptEvent& e) { out->prompt = e.tokens; }});
  std::future<Outcome> f = done->get_future();
  if (f.wait_for(std::chrono::seconds(60)) != std::future_status::ready) throw std::runtime_error("no final event");
  return f.get();
}

PipelineConfig config(const std::string& name) {
  PipelineConfig c;
  c.model_path = hf_fixture(name);
  c.n_kv_blocks = 64;
  c.stages = {{.first_layer = 0, .last_layer = -1, .threads = 2}};
  return c;
}

std::unique_ptr<Pipeline> start(const std::string& name, bool vision = true) {
  PipelineConfig c = config(name);
  c.vision = vision;
  return Pipeline::start(c);
}

// Every case of a reference gives transformers' prompt and greedy tokens.
void expect_reference_greedy(Pipeline& p, const nlohmann::json& ref, const std::vector<std::string>& images) {
  for (const nlohmann::json& c : ref["cases"]) {
    const Outcome r = run(p, chat(c["messages"], images));
    ASSERT_EQ(r.final.reason, EndReason::length) << r.final.error_message;
    EXPECT_EQ(r.prompt, c["prompt_ids"].get<std::vector<int32_t>>()) << c["text"];
    EXPECT_EQ(r.tokens, c["greedy"].get<std::vector<int32_t>>()) << c["text"];
  }
}

void expect_reference_greedy(Pipeline& p, const std::string& name) {
  expect_reference_greedy(p, hf_reference(name), llava_images(name));
}

class VisionPipeline : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!vision::image_codecs_available()) GTEST_SKIP() << "this build decodes no images (no libpng or libjpeg)";
  }
};

TEST_P(VisionPipeline, ChatsWithImagesGiveTransformersPromptAndGreedyTokens) {
  const test::ExactMath exact;
  auto p = start(GetParam());
  EXPECT_EQ(p->model_info().image_tokens, hf_reference(GetParam())["image_tokens"].get<int32_t>());
  expect_reference_greedy(*p, GetParam());
}

// Chunks of 7 tokens: every LLaVA image's rows reach the first stage over
// several steps, each step taking the rows its chunk covers; a Gemma 3
// image (16 rows, seen whole) is one step's, the chunks stopping before it
// or stretching over it.
TEST_P(VisionPipeline, ChunkedPrefillSplitsImagesAcrossSteps) {
  const test::ExactMath exact;
  PipelineConfig c = config(GetParam());
  c.scheduler.prefill_chunk = 7;
  auto p = Pipeline::start(c);
  expect_reference_greedy(*p, GetParam());
}

// The first layer in a `troupe stage` worker: the images' rows cross the
// wire with each step (StageSeq::embeds), in chunks.
TEST_P(VisionPipeline, ARemoteFirstStageReadsTheImagesFromTheWire) {
  const test::ExactMath exact;
  test::StageProcess worker;
  ASSERT_TRUE(
      worker.start({"-m", hf_fixture(GetParam()), "--layers", "0:1", "-t", "1", "--kv-blocks", "64", "--exact-math"}));
  PipelineConfig c = config(GetParam());
  c.scheduler.prefill_chunk = 9;
  c.stages = {{.first_layer = 0, .last_layer = 1, .remote = worker.address()},
              {.first_layer = 1, .last_layer = -1, .threads = 1}};
  auto p = Pipeline::start(c);
  expect_reference_greedy(*p, GetParam());
}

TEST_P(VisionPipeline, ThePrefixCacheSharesAnImagesBlocksOnlyWithTheSameImage) {
  const test::ExactMath exact;
  // The cached run computes the prompt's tail in a shorter step: its bits
  // equal the first run's only when no kernel picks its path by step size.
  const test::BatchInvariantMath invariant;
  auto p = start(GetParam());
  const nlohmann::json ref = hf_reference(GetParam());
  const nlohmann::json& one = ref["cases"][0]["messages"];  // the image, then a question
  const std::vector<std::string> images = llava_images(GetParam());
  const Outcome first = run(*p, chat(one, images));
  const uint64_t hits_before = p->stats().prefix_hit_tokens;
  const Outcome again = run(*p, chat(one, images));
  const uint64_t same_image_hits = p->stats().prefix_hit_tokens - hits_before;
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(again.logprobs, first.logprobs);
  // Every full block of the same prompt is found again, images included.
  EXPECT_GE(same_image_hits, (first.prompt.size() - 1) / 16 * 16);

  // The other image in its place: the same placeholder ids, other features.
  const Outcome other = run(*p, chat(one, {images[1], images[0]}));
  const uint64_t other_hits = p->stats().prefix_hit_tokens - hits_before - same_image_hits;
  EXPECT_EQ(other.prompt, first.prompt);
  // The tiny models' greedy tokens may not move with the image; their
  // probabilities do.
  EXPECT_NE(other.logprobs, first.logprobs);
  // The image starts in the first block: nothing of it is shared.
  EXPECT_EQ(other_hits, 0u);
}

// A conversation's next turn sends its image again: the tower runs once,
// the second request takes the features the vision actor kept.
TEST_P(VisionPipeline, AnImageSentAgainIsNotEncodedAgain) {
  const test::ExactMath exact;
  auto p = start(GetParam());
  const nlohmann::json ref = hf_reference(GetParam());
  const std::vector<std::string> images = llava_images(GetParam());
  const Outcome first = run(*p, chat(ref["cases"][0]["messages"], images));  // image 0
  EXPECT_EQ(p->stats().images_encoded, 1u);
  const Outcome both = run(*p, chat(ref["cases"][1]["messages"], images));  // images 0 and 1
  const PipelineStats s = p->stats();
  EXPECT_EQ(s.images_encoded, 2u);
  EXPECT_EQ(s.image_cache_hits, 1u);
  EXPECT_EQ(both.tokens, ref["cases"][1]["greedy"].get<std::vector<int32_t>>());
  EXPECT_EQ(first.tokens, ref["cases"][0]["greedy"].get<std::vector<int32_t>>());
}

TEST_P(VisionPipeline, AnUnreadableImageEndsItsRequestAloneNamingTheField) {
  auto p = start(GetParam());
  const nlohmann::json ref = hf_reference(GetParam());
  std::vector<std::string> images = llava_images(GetParam());
  images[1] = images[1].substr(0, images[1].size() / 3);                   // a PNG cut short
  const Outcome bad = run(*p, chat(ref["cases"][1]["messages"], images));  // image 0, then the cut one
  EXPECT_EQ(bad.final.reason, EndReason::error);
  EXPECT_EQ(bad.final.error_code, Errc::invalid_argument);
  EXPECT_EQ(bad.final.error_param, "messages[0].content[3].image_url");
  EXPECT_NE(bad.final.error_message.find("cannot read the image"), std::string::npos) << bad.final.error_message;
  EXPECT_TRUE(bad.tokens.empty());
  // The pipeline goes on serving.
  const Outcome good = run(*p, chat(ref["cases"][0]["messages"], llava_images(GetParam())));
  EXPECT_EQ(good.final.reason, EndReason::length) << good.final.error_message;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VisionPipeline, ::testing::Values("llava_clip", "llava_siglip", "gemma3_vision"));

// The same models as llama.cpp's users have them: a text GGUF and an mmproj
// (`--mmproj`), both written by llama.cpp's converters
// (tests/fixtures/gguf_vision/), give transformers' prompt and greedy tokens
// for the weights the files hold, whole and in chunks of 7.
class MmprojPipeline : public VisionPipeline {
 protected:
  static PipelineConfig gguf_config(const std::string& name) {
    PipelineConfig c = config(name);
    c.model_path = test::gguf_vision_fixture(name) + "/model.gguf";
    c.mmproj = test::gguf_vision_fixture(name) + "/mmproj.gguf";
    return c;
  }
};

TEST_P(MmprojPipeline, ChatsWithImagesGiveTransformersPromptAndGreedyTokens) {
  const test::ExactMath exact;
  const nlohmann::json ref = test::gguf_vision_reference(GetParam());
  for (const int chunk : {0, 7}) {
    PipelineConfig c = gguf_config(GetParam());
    if (chunk > 0) c.scheduler.prefill_chunk = chunk;
    auto p = Pipeline::start(c);
    EXPECT_EQ(p->model_info().image_tokens, ref["image_tokens"].get<int32_t>());
    SCOPED_TRACE("prefill chunk " + std::to_string(chunk));
    expect_reference_greedy(*p, ref, llava_images(GetParam()));
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MmprojPipeline, ::testing::Values("llava_clip", "gemma3_vision"));

TEST(VisionPipelineRules, AnImageTokenTypedIntoTheTextIsRefused) {
  auto p = start("llava_clip");
  const nlohmann::json text = {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "look: <image> here"}}}}}};
  const Outcome r = run(*p, chat(text, {}));
  EXPECT_EQ(r.final.reason, EndReason::error);
  EXPECT_EQ(r.final.error_code, Errc::invalid_argument);
  EXPECT_NE(r.final.error_message.find("image token '<image>' 1 time(s) but no image"), std::string::npos)
      << r.final.error_message;
}

TEST(VisionPipelineRules, ATemplateThatPlacesNoImageIsRefused) {
  PipelineConfig c;
  c.model_path = hf_fixture("llava_clip");
  c.n_kv_blocks = 64;
  c.chat_template = "{% for m in messages %}{{ m['role'] }}: text only\n{% endfor %}";
  auto p = Pipeline::start(c);
  const nlohmann::json ref = hf_reference("llava_clip");
  const Outcome r = run(*p, chat(ref["cases"][0]["messages"], llava_images("llava_clip")));
  EXPECT_EQ(r.final.reason, EndReason::error);
  EXPECT_EQ(r.final.error_param, "messages");
  EXPECT_NE(r.final.error_message.find("0 time(s) for 1 image(s)"), std::string::npos) << r.final.error_message;
}

TEST(VisionPipelineRules, WithoutItsVisionTheModelRefusesImagesAndStillReadsText) {
  auto p = start("llava_clip", /*vision=*/false);
  EXPECT_EQ(p->model_info().image_tokens, 0);
  const nlohmann::json ref = hf_reference("llava_clip");
  const Outcome r = run(*p, chat(ref["cases"][0]["messages"], llava_images("llava_clip")));
  EXPECT_EQ(r.final.reason, EndReason::error);
  EXPECT_EQ(r.final.error_param, "messages[0].content[0].image_url");
  EXPECT_NE(r.final.error_message.find("reads text only"), std::string::npos) << r.final.error_message;
  const test::ExactMath exact;
  const nlohmann::json& text = ref["cases"][2];
  const Outcome t = run(*p, chat(text["messages"], {}));
  EXPECT_EQ(t.tokens, text["greedy"].get<std::vector<int32_t>>());
}

TEST(VisionPipelineRules, AnMmprojThatDoesNotFitTheTextModelIsRefusedAtStart) {
  PipelineConfig c = config("llava_clip");
  c.model_path = test::gguf_vision_fixture("gemma3_vision") + "/model.gguf";
  c.mmproj = test::gguf_vision_fixture("llava_clip") + "/mmproj.gguf";  // Gemma 3's vocabulary has no <image>
  try {
    Pipeline::start(c);
    ADD_FAILURE() << "started with LLaVA's mmproj beside Gemma 3's text model";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_format);
    EXPECT_NE(std::string(e.what()).find("no <image> token"), std::string::npos) << e.what();
  }
}

TEST(VisionPipelineRules, TheTowersDeviceIsCheckedAtStart) {
  PipelineConfig c = config("llava_clip");
  c.vision_device = "tpu";
  try {
    Pipeline::start(c);
    ADD_FAILURE() << "started with vision_device tpu";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("vision_device"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace troupe
