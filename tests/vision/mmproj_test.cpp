// llama.cpp's mmproj files (tests/fixtures/gguf_vision/, written by llama.cpp's
// converters from the tiny HF fixtures; tools/fixtures/make_gguf_vision_fixtures.py):
// the tower and projector read as the HF checkpoint reads them, and the
// image features transformers computes from the PNG files over the weights
// the file holds. Each broken or foreign file is refused, naming the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"
#include "model/gguf.hpp"
#include "model/gguf_writer.hpp"
#include "model/model.hpp"
#include "tests/exact_math.hpp"
#include "tests/vision/llava_fixture.hpp"
#include "vision/image.hpp"
#include "vision/vision_encoder.hpp"
#include "vision/vision_model.hpp"

namespace troupe::vision {
namespace {

namespace fs = std::filesystem;
using test::file_bytes;
using test::gguf_vision_fixture;
using test::gguf_vision_reference;
using test::hf_fixture;

std::string mmproj(const std::string& name) { return gguf_vision_fixture(name) + "/mmproj.gguf"; }
std::string text_gguf(const std::string& name) { return gguf_vision_fixture(name) + "/model.gguf"; }

std::shared_ptr<const VisionModel> load(const std::string& name) {
  return VisionModel::load_mmproj(mmproj(name), Model::load(text_gguf(name))->vocab());
}

class Mmproj : public ::testing::TestWithParam<std::string> {};

// Everything the checkpoint's config.json and processor config say, the
// mmproj and the text model's vocabulary say too.
TEST_P(Mmproj, ReadsTheTowerAsItsCheckpointDoes) {
  const auto gguf = load(GetParam());
  const auto hf = VisionModel::load(hf_fixture(GetParam()));
  ASSERT_NE(gguf, nullptr);
  ASSERT_NE(hf, nullptr);
  const VisionConfig& g = gguf->config();
  const VisionConfig& h = hf->config();
  EXPECT_EQ(g.tower, h.tower);
  EXPECT_EQ(g.projector, h.projector);
  EXPECT_EQ(g.hidden, h.hidden);
  EXPECT_EQ(g.n_ff, h.n_ff);
  EXPECT_EQ(g.n_head, h.n_head);
  EXPECT_EQ(g.n_run, h.n_run);  // LLaVA's converter keeps only the layers run
  EXPECT_EQ(g.image_size, h.image_size);
  EXPECT_EQ(g.patch_size, h.patch_size);
  EXPECT_FLOAT_EQ(g.norm_eps, h.norm_eps);
  EXPECT_EQ(g.act, h.act);
  EXPECT_EQ(g.class_token, h.class_token);
  EXPECT_EQ(g.drop_first, h.drop_first);
  EXPECT_EQ(g.post_norm, h.post_norm);
  EXPECT_EQ(g.pool, h.pool);
  EXPECT_EQ(g.projector_act, h.projector_act);
  EXPECT_EQ(g.projector_hidden, h.projector_hidden);
  EXPECT_EQ(g.text_embd, h.text_embd);
  EXPECT_EQ(g.image_token, h.image_token);
  EXPECT_EQ(g.image_begin, h.image_begin);
  EXPECT_EQ(g.image_end, h.image_end);
  EXPECT_EQ(g.open_attention, h.open_attention);
  EXPECT_EQ(g.image_tokens(), gguf_vision_reference(GetParam())["image_tokens"].get<int32_t>());

  const ImageProcessorConfig& gp = gguf->processor();
  const ImageProcessorConfig& hp = hf->processor();
  EXPECT_EQ(fixed_output_size(gp), fixed_output_size(hp));
  EXPECT_EQ(gp.shortest_edge, hp.shortest_edge);
  EXPECT_EQ(gp.resample, hp.resample);
  EXPECT_EQ(gp.do_center_crop, hp.do_center_crop);
  for (int c = 0; c < 3; ++c) {
    EXPECT_FLOAT_EQ(gp.image_mean[c], hp.image_mean[c]);
    EXPECT_FLOAT_EQ(gp.image_std[c], hp.image_std[c]);
  }
}

// The PNG files through the image processor and the tower the mmproj holds:
// transformers' features over the same weights (those the file stores in
// f16 rounded so), within 1e-5 of the largest, as the HF fixtures' are.
TEST_P(Mmproj, FeaturesMatchTransformersFromThePngFiles) {
  if (!image_codecs_available()) GTEST_SKIP() << "this build decodes no images (no libpng or libjpeg)";
  const test::ExactMath exact;
  const auto model = load(GetParam());
  CpuBackend backend({.n_threads = 2});
  VisionEncoder encoder(model, backend);
  const nlohmann::json ref = gguf_vision_reference(GetParam());
  const auto want = ref["cases"][1]["image_features"].get<std::vector<float>>();  // image 0 then image 1
  const size_t per_image = want.size() / 2;
  for (size_t i = 0; i < 2; ++i) {
    const std::string png = file_bytes(hf_fixture(GetParam()) + "/image" + std::to_string(i) + ".png");
    const std::vector<float> got = encoder.encode_image({reinterpret_cast<const uint8_t*>(png.data()), png.size()});
    ASSERT_EQ(got.size(), per_image);
    double worst = 0.0, scale = 0.0;
    for (size_t j = 0; j < per_image; ++j) {
      worst = std::max(worst, std::abs(static_cast<double>(got[j]) - want[i * per_image + j]));
      scale = std::max(scale, std::abs(static_cast<double>(want[i * per_image + j])));
    }
    EXPECT_LT(worst / scale, 1e-5) << "image " << i;
  }
}

// The tower's keys and values: the checkpoint's precision unless told.
TEST_P(Mmproj, TheTowersKeysAndValuesTakeTheTypeAsked) {
  const auto model = load(GetParam());
  CpuBackend backend({.n_threads = 1});
  EXPECT_EQ(VisionEncoder(model, backend).kv_type(), KvType::f32);  // the fixtures' towers are f32
  EXPECT_EQ(VisionEncoder(model, backend, KvType::f16).kv_type(), KvType::f16);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Mmproj, ::testing::Values("llava_clip", "gemma3_vision"));

// A copy of an mmproj with some metadata replaced and a tensor left out.
std::string rewritten(const std::string& name, const std::string& tag, const std::string& key, gguf::Value value,
                      const std::string& drop = "") {
  const gguf::GgufFile src = gguf::GgufFile::open(mmproj(name));
  gguf::GgufWriter w;
  bool replaced = false;
  for (const auto& [k, v] : src.metadata()) {
    if (k != "general.alignment") w.add(k, k == key ? value : v);
    replaced = replaced || k == key;
  }
  if (!key.empty() && !replaced) w.add(key, value);
  for (const gguf::TensorInfo& t : src.tensors()) {
    if (t.name == drop) continue;
    const auto* bytes = static_cast<const uint8_t*>(t.data);
    w.add_tensor(t.name, t.type, t.shape, std::vector<uint8_t>(bytes, bytes + t.n_bytes));
  }
  const std::string path = (fs::temp_directory_path() / ("troupe_mmproj_" + tag + ".gguf")).string();
  w.write(path);
  return path;
}

std::string refusal(const std::string& path, const VocabData& vocab) {
  try {
    VisionModel::load_mmproj(path, vocab);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

TEST(MmprojRefusals, EachBrokenOrForeignFileIsNamed) {
  const auto llava_text = Model::load(text_gguf("llava_clip"));
  const VocabData& vocab = llava_text->vocab();
  // A text model given as the mmproj.
  EXPECT_NE(refusal(text_gguf("llava_clip"), vocab).find("not an mmproj file"), std::string::npos);
  // A projector llama.cpp has and Troupe does not read.
  const std::string ldp = rewritten("llava_clip", "ldp", "clip.projector_type", gguf::Value{std::string("ldp")});
  EXPECT_NE(refusal(ldp, vocab).find("projector_type 'ldp' is not read"), std::string::npos) << refusal(ldp, vocab);
  // A missing tensor, and sizes that describe no tower.
  const std::string no_q = rewritten("llava_clip", "no_q", "", gguf::Value{0u}, "v.blk.1.attn_q.weight");
  EXPECT_NE(refusal(no_q, vocab).find("v.blk.1.attn_q.weight"), std::string::npos) << refusal(no_q, vocab);
  const std::string heads = rewritten("llava_clip", "heads", "clip.vision.attention.head_count", gguf::Value{5u});
  EXPECT_NE(refusal(heads, vocab).find("do not describe a vision tower"), std::string::npos);
  // Several feature layers (LLaVA-NeXT's).
  const std::string layers = rewritten("llava_clip", "layers", "clip.vision.feature_layer",
                                       gguf::Value{gguf::Array{std::vector<int32_t>{1, 2}}});
  EXPECT_NE(refusal(layers, vocab).find("several layers"), std::string::npos) << refusal(layers, vocab);
  // A text model whose vocabulary has no image token.
  const auto stories = Model::load(std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf");
  EXPECT_NE(refusal(mmproj("llava_clip"), stories->vocab()).find("no <image> token"), std::string::npos);
  EXPECT_NE(refusal(mmproj("gemma3_vision"), stories->vocab()).find("no <image_soft_token> token"), std::string::npos);
  // A truncated file.
  const std::string cut = (fs::temp_directory_path() / "troupe_mmproj_cut.gguf").string();
  fs::copy_file(mmproj("gemma3_vision"), cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  EXPECT_NE(refusal(cut, vocab).find(cut), std::string::npos) << refusal(cut, vocab);
  for (const std::string& p : {ldp, no_q, heads, layers, cut}) fs::remove(p);
}

}  // namespace
}  // namespace troupe::vision
