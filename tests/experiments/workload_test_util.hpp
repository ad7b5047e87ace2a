// Shared helpers of the workload tests: the real tokenizers of the shared
// data (stories260K's 512-token SentencePiece vocab, Llama 2's 32000), and
// small files written into a fresh temporary folder.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "model/model.hpp"
#include "model/model_tokenizer.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe::test {

inline const Tokenizer& stories_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok = [] {
    const auto model = Model::load(std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf");
    return load_model_tokenizer(*model);
  }();
  return *tok;
}

inline const Tokenizer& llama2_tokenizer() {
  static const std::unique_ptr<Tokenizer> tok =
      load_hf_tokenizer(std::string(TROUPE_SHARED_DIR) + "/tokenizers/llama2");
  return *tok;
}

// A fresh folder per test (named after it), so tests never see each other's files.
inline std::filesystem::path temp_dir() {
  const testing::TestInfo* info = testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = "troupe_workload_" + std::to_string(getpid()) + "_" + info->test_suite_name() + "_" +
                           info->name();
  const std::filesystem::path dir = std::filesystem::path(testing::TempDir()) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

}  // namespace troupe::test
