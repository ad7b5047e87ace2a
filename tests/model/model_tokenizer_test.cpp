// A model's tokenizer and chat template come from where the model came from:
// the GGUF file's metadata, or the tokenizer files of a Hugging Face directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "model/model.hpp"
#include "model/model_tokenizer.hpp"

namespace troupe {
namespace {

namespace fs = std::filesystem;

fs::path copy_tiny_model(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / ("troupe_model_tok_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path src = fs::path(TROUPE_FIXTURES_DIR) / "hf" / "gpt2";
  fs::copy_file(src / "config.json", dir / "config.json");
  fs::copy_file(src / "model.safetensors", dir / "model.safetensors");
  return dir;
}

TEST(ModelTokenizer, GgufModelUsesItsOwnVocabulary) {
  auto model = Model::load(std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf");
  auto tok = load_model_tokenizer(*model);
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->bos(), 1);
}

TEST(ModelTokenizer, HfDirectoryWithoutTokenizerFilesIsAClearError) {
  const fs::path dir = copy_tiny_model("none");
  auto model = Model::load(dir.string());
  try {
    load_model_tokenizer(*model);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_format);
    EXPECT_NE(std::string(e.what()).find("no tokenizer"), std::string::npos) << e.what();
  }
  EXPECT_EQ(model->chat_template(), "");
}

TEST(ModelTokenizer, HfDirectoryReadsTokenizerFilesAndChatTemplate) {
  const fs::path dir = copy_tiny_model("gpt2");
  const fs::path shared = fs::path(TROUPE_SHARED_DIR) / "tokenizers";
  fs::copy_file(shared / "gpt2" / "encoder.json", dir / "encoder.json");
  fs::copy_file(shared / "gpt2" / "vocab.bpe", dir / "vocab.bpe");
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "{% for m in messages %}{{ m['content'] }}{% endfor %}"})";
  auto model = Model::load(dir.string());
  auto tok = load_model_tokenizer(*model);
  EXPECT_EQ(tok->n_vocab(), 50257);
  EXPECT_EQ(tok->encode("Hello world", false, false), (std::vector<int32_t>{15496, 995}));  // GPT-2's published ids
  EXPECT_EQ(model->chat_template(), "{% for m in messages %}{{ m['content'] }}{% endfor %}");
}

}  // namespace
}  // namespace troupe
