// Helpers for the safetensors tests: small files written byte by byte (the
// header JSON as text, so a test can make it as wrong as it likes), temporary
// model directories, and checks on the errors that result.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace troupe::st_test {

namespace fs = std::filesystem;

// A fresh directory under the test temp dir, removed afterwards.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    std::random_device rd;
    path_ = fs::path(testing::TempDir()) / ("troupe_" + tag + "_" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// An 8-byte little-endian length (header_len, or the header's true size),
// the header text, then the data bytes.
inline void write_raw(const std::string& path, const std::string& header, const std::vector<uint8_t>& data,
                      std::optional<uint64_t> header_len = std::nullopt) {
  std::vector<uint8_t> bytes(8);
  const uint64_t len = header_len.value_or(header.size());
  for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(len >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  write_bytes(path, bytes);
}

struct Tensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

template <class T>
std::vector<uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// A well-formed file: tensors back to back in the given order.
inline void write_safetensors(const std::string& path, const std::vector<Tensor>& tensors,
                              const nlohmann::json& metadata = nullptr) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<uint8_t> data;
  for (const Tensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  write_raw(path, header.dump(), data);
}

// Runs fn, which must throw troupe::Error of kind `code` whose message holds
// every one of `parts`.
template <class Fn>
void expect_error(Fn&& fn, Errc code, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown; expected one containing '" << *parts.begin() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace troupe::st_test
