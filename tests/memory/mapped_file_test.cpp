// MappedFile: a whole file mapped read-only, moved without copying, and the
// errors for files that cannot be mapped.
#include "memory/mapped_file.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>

#include "core/error.hpp"

namespace troupe {
namespace {

std::string write_file(const std::string& name, const std::string& content) {
  const std::string path = testing::TempDir() + "troupe_mapped_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  return path;
}

TEST(MappedFile, MapsWholeFile) {
  std::string content(10000, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 13);
  const std::string path = write_file("whole", content);
  const MappedFile f = MappedFile::open(path);
  EXPECT_EQ(f.path(), path);
  ASSERT_EQ(f.size(), content.size());
  ASSERT_NE(f.data(), nullptr);
  EXPECT_EQ(std::memcmp(f.data(), content.data(), content.size()), 0);
  // Hints, including ranges that are unaligned or run past the end, are harmless.
  f.advise(MappedFile::Advice::will_need);
  f.advise(MappedFile::Advice::sequential, 4097, 100);
  f.advise(MappedFile::Advice::random, 9000, 1u << 30);
  f.advise(MappedFile::Advice::normal, 20000, 1);
  EXPECT_EQ(f.data()[4097], static_cast<uint8_t>(content[4097]));
}

TEST(MappedFile, MoveKeepsTheMapping) {
  const std::string path = write_file("move", "weights");
  MappedFile a = MappedFile::open(path);
  const uint8_t* p = a.data();
  MappedFile b = std::move(a);
  EXPECT_EQ(b.data(), p);  // pointers into the mapping survive a move
  EXPECT_EQ(b.size(), 7u);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(a.size(), 0u);
  MappedFile c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(std::memcmp(c.data(), "weights", 7), 0);
}

TEST(MappedFile, EmptyFile) {
  const std::string path = write_file("empty", "");
  const MappedFile f = MappedFile::open(path);
  EXPECT_EQ(f.size(), 0u);
  EXPECT_EQ(f.data(), nullptr);
  f.advise(MappedFile::Advice::will_need);
}

TEST(MappedFile, MissingFileIsIoErrorNamingPath) {
  const std::string path = testing::TempDir() + "troupe_mapped_no_such_file.gguf";
  try {
    MappedFile::open(path);
    FAIL() << "opened a missing file";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::strerror(ENOENT)), std::string::npos) << msg;
  }
}

TEST(MappedFile, DirectoryIsIoError) {
  try {
    MappedFile::open(testing::TempDir());
    FAIL() << "mapped a directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace troupe
