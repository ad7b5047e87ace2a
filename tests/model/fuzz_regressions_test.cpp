// Inputs the fuzzers (tests/fuzz) found to fail, kept in
// tests/fuzz/regressions/<target>/ and loaded here by the normal suite: each
// must now end in a clear troupe::Error, not a crash or a huge allocation.
// docs/reliability.md lists them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "model/model.hpp"

namespace troupe {
namespace {

std::string regression(const std::string& target, const std::string& name) {
  return std::string(TROUPE_FIXTURES_DIR) + "/../fuzz/regressions/" + target + "/" + name;
}

void expect_load_error(const std::string& path, const std::string& part) {
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  try {
    Model::load(path);
    ADD_FAILURE() << "loaded " << path;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_format) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// A tiny GGUF whose llama.block_count says 4,194,305: the list of layers
// (1.5 GB of LayerWeights) was made before any layer's tensors were looked up.
TEST(FuzzRegressions, GgufBlockCountBeyondTheTensorTable) {
  expect_load_error(regression("gguf_model", "block_count_4194305.gguf"),
                    "block_count 4194305 is more than the file's 12 tensors");
}

// A folder with this config.json and model.safetensors (header JSON, no data).
std::string hf_folder(const std::string& name, const std::string& config, const std::string& header) {
  const std::filesystem::path dir = std::filesystem::path(TROUPE_BINARY_DIR) / "fuzz_regressions_test" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << config;
  std::ofstream st(dir / "model.safetensors", std::ios::binary);
  const uint64_t n = header.size();
  char len[8];
  std::memcpy(len, &n, 8);
  st.write(len, 8);
  st << header;
  return dir.string();
}

// nlohmann's parser throws out_of_range, not parse_error, for a number past
// a double; the readers caught only parse_error (the same bug the config
// reader fuzzer found in actors/json_reader.hpp).
TEST(FuzzRegressions, NumberPastADoubleInConfigAndSafetensorsHeader) {
  expect_load_error(hf_folder("config", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 1e99999})", "{}"),
                    "config.json");
  expect_load_error(hf_folder("header", R"({"architectures": ["LlamaForCausalLM"]})",
                              R"({"a": {"dtype": "F32", "shape": [1e99999], "data_offsets": [0, 4]}})"),
                    "model.safetensors");
}

// An adapter GGUF whose blk.1.attn_v lora_b is [2, 0]: an empty B reached
// a zero-length copy from a null data pointer (UBSan), where it should have
// been refused.
TEST(FuzzRegressions, LoraAdapterWithAnEmptyMatrix) {
  const std::string adapter = regression("lora_adapter", "lora_b_with_no_rows.gguf");
  ASSERT_TRUE(std::filesystem::exists(adapter)) << adapter;
  ModelLoadOptions options;
  options.lora = {{.path = adapter}};
  try {
    Model::load(std::string(TROUPE_FIXTURES_DIR) + "/gguf/llama.gguf", options);
    ADD_FAILURE() << "loaded with " << adapter;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_format) << e.what();
    EXPECT_NE(std::string(e.what()).find("'blk.1.attn_v.weight' is an empty matrix"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace troupe
