// RAII mmap of a whole file (POSIX). Mapped MAP_PRIVATE|PROT_READ: the process
// can never write through to the model file, and clean pages can be dropped
// and re-read by the kernel under memory pressure.
#include "memory/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.hpp"

namespace troupe {
namespace {

[[noreturn]] void throw_io(const std::string& path, const char* what, int err) {
  throw Error(Errc::io, path + ": " + what + ": " + std::strerror(err));
}

// Closes the descriptor on every path out of open(); the mapping keeps the
// file alive on its own.
struct FdGuard {
  int fd;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

int to_madvise(MappedFile::Advice a) {
  switch (a) {
    case MappedFile::Advice::normal: return MADV_NORMAL;
    case MappedFile::Advice::sequential: return MADV_SEQUENTIAL;
    case MappedFile::Advice::random: return MADV_RANDOM;
    case MappedFile::Advice::will_need: return MADV_WILLNEED;
    case MappedFile::Advice::dont_need: return MADV_DONTNEED;
  }
  return MADV_NORMAL;
}

}  // namespace

MappedFile MappedFile::open(const std::string& path) {
  FdGuard fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) throw_io(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) throw_io(path, "cannot stat", errno);
  if (!S_ISREG(st.st_mode)) throw Error(Errc::io, path + ": not a regular file");

  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  if (f.size_ == 0) return f;  // mmap of length 0 is an error; an empty map is not
  void* p = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (p == MAP_FAILED) throw_io(path, "cannot map", errno);
  f.data_ = static_cast<const uint8_t*>(p);
  return f;
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

void MappedFile::release() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

void MappedFile::advise(Advice advice, size_t offset, size_t length) const {
  if (data_ == nullptr || offset >= size_) return;
  if (length > size_ - offset) length = size_ - offset;
  // madvise needs a page-aligned start; the mapping itself is page-aligned.
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t begin = offset / page * page;
  ::madvise(const_cast<uint8_t*>(data_) + begin, offset + length - begin, to_madvise(advice));
}

}  // namespace troupe
