// Reading tests/fixtures/hf/llava_* (made by tools/fixtures/make_llava_models.py
// with transformers): the model directory, its reference.json and its PNG
// files, for the vision tests and the pipeline's; and the same models as
// llama.cpp's text and mmproj GGUF files (tests/fixtures/gguf_vision/, made by
// tools/fixtures/make_gguf_vision_fixtures.py).
#pragma once

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace troupe::test {

inline std::string hf_fixture(const std::string& name) { return std::string(TROUPE_FIXTURES_DIR) + "/hf/" + name; }

inline nlohmann::json hf_reference(const std::string& name) {
  std::ifstream in(hf_fixture(name) + "/reference.json");
  return nlohmann::json::parse(in);
}

inline std::string gguf_vision_fixture(const std::string& name) {
  return std::string(TROUPE_FIXTURES_DIR) + "/gguf_vision/" + name;
}

inline nlohmann::json gguf_vision_reference(const std::string& name) {
  std::ifstream in(gguf_vision_fixture(name) + "/reference.json");
  return nlohmann::json::parse(in);
}

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The fixture's two PNG files (image0.png, image1.png), as a client sends them.
inline std::vector<std::string> llava_images(const std::string& name) {
  return {file_bytes(hf_fixture(name) + "/image0.png"), file_bytes(hf_fixture(name) + "/image1.png")};
}

}  // namespace troupe::test
