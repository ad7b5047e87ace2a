// Helpers for the GGUF tests: small files built with GgufWriter, then read
// back or corrupted byte by byte, and checks on the errors that result.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/error.hpp"
#include "model/gguf.hpp"
#include "model/gguf_writer.hpp"

namespace troupe::gguf::test {

// Per process: ctest runs tests in parallel, and tests share helper files
// (two writing "sample_source" at once broke each other's rename).
inline std::string temp_path(const std::string& name) {
  return testing::TempDir() + "troupe_gguf_" + std::to_string(getpid()) + "_" + name + ".gguf";
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  // A fresh file rather than a truncated one: ext4 flushes a file truncated
  // and rewritten (auto_da_alloc), which makes thousands of rewrites slow.
  std::remove(path.c_str());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Offset of the first occurrence of `needle`; fails the test if absent.
inline size_t find_bytes(const std::vector<uint8_t>& bytes, const std::string& needle) {
  for (size_t i = 0; i + needle.size() <= bytes.size(); ++i) {
    if (std::memcmp(bytes.data() + i, needle.data(), needle.size()) == 0) return i;
  }
  ADD_FAILURE() << "'" << needle << "' not found";
  return 0;
}

template <class T>
void poke(std::vector<uint8_t>& bytes, size_t offset, T v) {
  ASSERT_LE(offset + sizeof v, bytes.size());
  std::memcpy(bytes.data() + offset, &v, sizeof v);
}

// Byte offsets of the fields of a tensor's entry in the tensor table.
struct TensorInfoAt {
  size_t n_dims, dims, type, offset;
};
inline TensorInfoAt tensor_info_at(const std::vector<uint8_t>& bytes, const std::string& name, uint32_t n_dims) {
  // The name is preceded by its u64 length; searching for length + name skips
  // any metadata string that happens to equal the name.
  std::string needle(8, '\0');
  const uint64_t len = name.size();
  std::memcpy(needle.data(), &len, 8);
  const size_t name_end = find_bytes(bytes, needle + name) + 8 + name.size();
  return {name_end, name_end + 4, name_end + 4 + 8 * n_dims, name_end + 8 + 8 * n_dims};
}

// Opens `path` and checks that it throws Error(code) whose message names the
// file and contains every fragment.
inline void expect_open_error(const std::string& path, Errc code, std::initializer_list<std::string> fragments) {
  try {
    GgufFile::open(path);
    ADD_FAILURE() << path << " opened without error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

// Runs fn, which must throw Error(code) containing every fragment.
template <class F>
void expect_error(F&& fn, Errc code, std::initializer_list<std::string> fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    const std::string msg = e.what();
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
  }
}

inline std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace troupe::gguf::test
