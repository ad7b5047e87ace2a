// config.json sizes over the limits (model/hf_config.cpp check_config) are
// refused before anything is sized by them: the layer list is made before
// any layer's tensors are looked up, so a config claiming millions of
// layers next to a small checkpoint must fail at the config.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.hpp"
#include "model/model.hpp"

namespace troupe {
namespace {

namespace fs = std::filesystem;

// The llama fixture with one config.json key replaced.
std::string patched_llama(const std::string& key, int64_t value) {
  const fs::path src = fs::path(TROUPE_FIXTURES_DIR) / "hf" / "llama";
  const fs::path dir = fs::path(TROUPE_BINARY_DIR) / "hf_config_limits_test" / key;
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(src / "model.safetensors", dir / "model.safetensors");
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(src / "config.json"));
  cfg[key] = value;
  std::ofstream(dir / "config.json") << cfg.dump();
  return dir.string();
}

TEST(HfConfigLimits, SizesOverTheLimits) {
  const std::string sizes = "sizes over the limits: at most 1024 layers";
  struct Case {
    std::string key;
    int64_t value;
    std::string message;
  };
  for (const Case& c : {Case{"num_hidden_layers", 4194305, sizes}, Case{"vocab_size", int64_t{1} << 40, sizes},
                        Case{"hidden_size", int64_t{1} << 21, sizes},
                        Case{"intermediate_size", int64_t{1} << 30, sizes},
                        // The RoPE tables (Llama 3 scaling here) are sized by head_dim: refused before them.
                        Case{"head_dim", int64_t{1} << 30, "head_dim 1073741824 must be in [1, 1048576]"}}) {
    try {
      Model::load(patched_llama(c.key, c.value));
      ADD_FAILURE() << c.key << " = " << c.value << " loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::bad_format) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << c.key << ": " << e.what();
    }
  }
  // The fixture itself, rewritten the same way, still loads.
  EXPECT_NO_THROW(Model::load(patched_llama("num_hidden_layers", 2)));
}

}  // namespace
}  // namespace troupe
