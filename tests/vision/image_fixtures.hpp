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

// RFC 4648 with padding, as Python's base64.b64encode writes it.
inline std::vector<uint8_t> base64_decode(const std::string& text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const int v = value(c);
    EXPECT_GE(v, 0) << "bad base64 character in fixture";
    acc = (acc << 6) | uint32_t(v & 63);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(uint8_t(acc >> bits));
    }
  }
  return out;
}

inline std::vector<float> base64_floats(const std::string& text) {
  const std::vector<uint8_t> bytes = base64_decode(text);
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);  // little-endian, as the host
  return out;
}

}  // namespace troupe::vision::testing
