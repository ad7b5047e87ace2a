// Reading tests/fixtures/images/ (made by tools/fixtures/make_image_fixtures.py
// with Pillow and transformers): the image files, reference.json, and the
// base64 its byte arrays are stored in.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/base64.hpp"

namespace troupe::vision::testing {

inline std::string images_dir() { return std::string(TROUPE_FIXTURES_DIR) + "/images"; }

inline std::vector<uint8_t> read_image_file(const std::string& name) {
  std::ifstream in(images_dir() + "/" + name, std::ios::binary);
  EXPECT_TRUE(in) << "missing fixture image " << name;
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline const nlohmann::json& reference() {
  static const nlohmann::json j = [] {
    std::ifstream in(images_dir() + "/reference.json");
    EXPECT_TRUE(in) << "missing tests/fixtures/images/reference.json";
    return in ? nlohmann::json::parse(in) : nlohmann::json::object();
  }();
  return j;
}

// The bytes of a base64 field (Python's base64.b64encode), as core's
// decoder reads them.
inline std::vector<uint8_t> base64_decode(const std::string& text) {
  const std::string bytes = troupe::base64_decode(text);
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

inline std::vector<float> base64_floats(const std::string& text) {
  const std::vector<uint8_t> bytes = base64_decode(text);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);  // little-endian, as the host
  return out;
}

}  // namespace troupe::vision::testing
