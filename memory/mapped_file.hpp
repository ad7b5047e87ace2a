// A read-only memory mapping of a whole file: the persistent weight pool.
// Weights are used in place from the mapping and never copied; the page cache
// shares them between processes that map the same model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe {

class MappedFile {
 public:
  // Access-pattern hints passed to madvise; they never change what is read.
  enum class Advice { normal, sequential, random, will_need, dont_need };

  // Maps `path` read-only. Throws Error(Errc::io, "<path>: <reason>") when the
  // file cannot be opened, is not a regular file or cannot be mapped. An empty
  // file maps to data() == nullptr, size() == 0.
  static MappedFile open(const std::string& path);

  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // The mapping is page-aligned and does not move when the object is moved,
  // so pointers into it stay valid for the life of whichever object owns it.
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Hints for the bytes [offset, offset + length), clamped to the file; the
  // range is widened to whole pages. A failed hint is ignored (it is only a
  // hint), so this never throws.
  void advise(Advice advice, size_t offset = 0, size_t length = SIZE_MAX) const;

 private:
  void release() noexcept;

  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

}  // namespace troupe
