// GGUF serialisation. The header (metadata and tensor table) is encoded in
// memory, since it is small; tensor data goes to the file in chunks of rows.
#include "model/gguf_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/error.hpp"

namespace troupe::gguf {
namespace {

constexpr int64_t kChunkBytes = int64_t{8} << 20;  // rows per RowSource call: about this many bytes

[[noreturn]] void invalid(const std::string& msg) { throw Error(Errc::invalid_argument, "GgufWriter: " + msg); }

uint64_t align_up(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// Owns the FILE and removes the partial file unless commit() ran.
class PartFile {
 public:
  explicit PartFile(const std::string& path) : path_(path), part_(path + ".part") {
    f_ = std::fopen(part_.c_str(), "wb");
    if (f_ == nullptr) fail("cannot create " + part_);
  }
  ~PartFile() {
    if (f_ != nullptr) std::fclose(f_);
    if (!committed_) std::remove(part_.c_str());
  }
  PartFile(const PartFile&) = delete;
  PartFile& operator=(const PartFile&) = delete;

  void write(const void* p, size_t n) {
    if (n != 0 && std::fwrite(p, 1, n, f_) != n) fail("write failed");
    written_ += n;
  }
  void pad_to(uint64_t offset) {
    static const uint8_t kZeros[256] = {};
    while (written() < offset) write(kZeros, std::min<uint64_t>(sizeof kZeros, offset - written()));
  }
  uint64_t written() const { return written_; }
  void commit() {
    const int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) fail("write failed");
    if (std::rename(part_.c_str(), path_.c_str()) != 0) fail("cannot rename " + part_);
    committed_ = true;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(Errc::io, path_ + ": " + what + ": " + std::strerror(errno));
  }
  std::string path_, part_;
  std::FILE* f_ = nullptr;
  uint64_t written_ = 0;
  bool committed_ = false;
};

}  // namespace

// Serialises into a buffer sized by a first, measuring pass (dst == nullptr),
// so the header is built without growing a vector byte by byte.
class GgufWriter::Encoder {
 public:
  explicit Encoder(uint8_t* dst = nullptr) : dst_(dst) {}

  size_t size() const { return size_; }

  void put_bytes(const void* p, size_t n) {
    if (dst_ != nullptr && n != 0) std::memcpy(dst_ + size_, p, n);
    size_ += n;
  }
  template <class T>
  void put(T v) {
    put_bytes(&v, sizeof v);
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    put_bytes(s.data(), s.size());
  }
  void put_value(const Value& v) {
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::string>) {
            put_string(x);
          } else if constexpr (std::is_same_v<T, Array>) {
            put_array(x);
          } else if constexpr (std::is_same_v<T, bool>) {
            put<uint8_t>(x ? 1 : 0);
          } else {
            put(x);
          }
        },
        v);
  }
  void put_array(const Array& a) {
    put<uint32_t>(static_cast<uint32_t>(a.type()));
    put<uint64_t>(a.size());
    std::visit(
        [&](const auto& items) {
          for (const auto& item : items) {
            using T = std::decay_t<decltype(item)>;
            if constexpr (std::is_same_v<T, std::string>) {
              put_string(item);
            } else if constexpr (std::is_same_v<T, Array>) {
              put_array(item);
            } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::vector<bool>::const_reference>) {
              put<uint8_t>(item ? 1 : 0);
            } else {
              put(item);
            }
          }
        },
        a.items);
  }

 private:
  uint8_t* dst_;
  size_t size_ = 0;
};

GgufWriter::GgufWriter(GgufWriterOptions options) : options_(options) {
  if (options_.version != 2 && options_.version != 3) invalid("version must be 2 or 3");
  const uint32_t a = options_.alignment;
  if (a == 0 || (a & (a - 1)) != 0) invalid("alignment " + std::to_string(a) + " is not a power of two");
  if (a != kDefaultAlignment) metadata_.emplace_back("general.alignment", Value{a});
}

void GgufWriter::add(std::string key, Value value) {
  if (key.empty()) invalid("empty metadata key");
  if (key == "general.alignment") invalid("set general.alignment through GgufWriterOptions");
  for (const auto& [k, v] : metadata_) {
    if (k == key) invalid("duplicate key '" + key + "'");
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::add_string_array(std::string key, std::vector<std::string> v) {
  add_array(std::move(key), Array{std::move(v)});
}
void GgufWriter::add_f32_array(std::string key, std::vector<float> v) {
  add_array(std::move(key), Array{std::move(v)});
}
void GgufWriter::add_i32_array(std::string key, std::vector<int32_t> v) {
  add_array(std::move(key), Array{std::move(v)});
}

int64_t GgufWriter::checked_bytes(const std::string& name, DType type, const std::vector<int64_t>& shape) const {
  const std::string what = "tensor '" + name + "'";
  for (const auto& t : tensors_) {
    if (t.name == name) invalid("duplicate tensor name '" + name + "'");
  }
  if (shape.empty() || shape.size() > static_cast<size_t>(kMaxDims)) invalid(what + " needs 1 to 4 dimensions");
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0 || __builtin_mul_overflow(n, d, &n)) invalid(what + " has a bad dimension");
  }
  const DTypeInfo& info = dtype_info(type);
  if (shape[0] % info.block_size != 0) {
    invalid(what + " row length " + std::to_string(shape[0]) + " is not a multiple of the block size");
  }
  return n / info.block_size * info.block_bytes;
}

void GgufWriter::add_tensor(std::string name, DType type, std::vector<int64_t> shape, RowSource source) {
  const int64_t n_bytes = checked_bytes(name, type, shape);
  if (!source) invalid("tensor '" + name + "' has no data source");
  tensors_.push_back({std::move(name), type, std::move(shape), n_bytes, std::move(source)});
}

void GgufWriter::add_tensor(std::string name, DType type, std::vector<int64_t> shape, std::vector<uint8_t> bytes) {
  const int64_t want = checked_bytes(name, type, shape);
  if (static_cast<int64_t>(bytes.size()) != want) {
    invalid("tensor '" + name + "' needs " + std::to_string(want) + " bytes, got " + std::to_string(bytes.size()));
  }
  // Held by the RowSource until write(); shared so the writer stays copyable.
  auto data = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  const int64_t row = row_bytes(type, shape[0]);
  add_tensor(std::move(name), type, std::move(shape), [data, row](int64_t first_row, int64_t n_rows, uint8_t* dst) {
    std::memcpy(dst, data->data() + first_row * row, static_cast<size_t>(n_rows * row));
  });
}

void GgufWriter::encode_header(Encoder& e) const {
  e.put<uint32_t>(kMagic);
  e.put<uint32_t>(options_.version);
  e.put<uint64_t>(tensors_.size());
  e.put<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    e.put_string(key);
    e.put<uint32_t>(static_cast<uint32_t>(value_type(value)));
    e.put_value(value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    e.put_string(t.name);
    e.put<uint32_t>(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) e.put<uint64_t>(static_cast<uint64_t>(d));
    e.put<uint32_t>(static_cast<uint32_t>(t.type));
    e.put<uint64_t>(offset);
    offset = align_up(offset + static_cast<uint64_t>(t.n_bytes), options_.alignment);
  }
}

void GgufWriter::write(const std::string& path) const {
  PartFile out(path);
  Encoder measure;
  encode_header(measure);
  std::vector<uint8_t> header(measure.size());
  Encoder e(header.data());
  encode_header(e);
  out.write(header.data(), header.size());
  const uint64_t data_start = align_up(header.size(), options_.alignment);
  out.pad_to(data_start);

  std::vector<uint8_t> chunk;
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    const int64_t row = row_bytes(t.type, t.shape[0]);
    const int64_t n_rows = t.n_bytes / row;
    const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkBytes / row);
    chunk.resize(static_cast<size_t>(std::min(n_rows, rows_per_chunk) * row));
    for (int64_t r = 0; r < n_rows; r += rows_per_chunk) {
      const int64_t n = std::min(rows_per_chunk, n_rows - r);
      t.source(r, n, chunk.data());
      out.write(chunk.data(), static_cast<size_t>(n * row));
    }
    offset = align_up(offset + static_cast<uint64_t>(t.n_bytes), options_.alignment);
    out.pad_to(data_start + offset);
  }
  out.commit();
}

}  // namespace troupe::gguf
