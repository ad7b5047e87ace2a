// The GGUF reader: walks the header, metadata and tensor table of a mapped
// file with a bounds-checked cursor, so a truncated or hostile file becomes an
// Error naming the file and the problem, never a read past the end.
#include "model/gguf.hpp"

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.hpp"

namespace troupe::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF parsing assumes a little-endian host");

constexpr int kMaxArrayDepth = 8;  // arrays of arrays; real files use none

// ggml's type names, for messages about types Troupe cannot run.
std::string ggml_type_name(uint32_t id) {
  static constexpr const char* kNames[] = {
      "f32",     "f16",     "q4_0",    "q4_1",   "q4_2 (removed)", "q4_3 (removed)", "q5_0",  "q5_1",
      "q8_0",    "q8_1",    "q2_K",    "q3_K",   "q4_K",           "q5_K",           "q6_K",  "q8_K",
      "iq2_xxs", "iq2_xs",  "iq3_xxs", "iq1_s",  "iq4_nl",         "iq3_s",          "iq2_s", "iq4_xs",
      "i8",      "i16",     "i32",     "i64",    "f64",            "iq1_m",          "bf16",  "q4_0_4_4 (removed)",
      "q4_0_4_8 (removed)", "q4_0_8_8 (removed)", "tq1_0", "tq2_0", "iq4_nl_4_4 (removed)", "iq4_nl_4_8 (removed)",
      "iq4_nl_8_8 (removed)", "mxfp4"};
  if (id < std::size(kNames)) return kNames[id];
  return "unknown";
}

// Minimum encoded size of one value of a type: bounds the element count an
// array can claim before anything is allocated for it.
uint64_t min_encoded_size(ValueType t) {
  switch (t) {
    case ValueType::u8: case ValueType::i8: case ValueType::boolean: return 1;
    case ValueType::u16: case ValueType::i16: return 2;
    case ValueType::u32: case ValueType::i32: case ValueType::f32: return 4;
    case ValueType::u64: case ValueType::i64: case ValueType::f64: return 8;
    case ValueType::string: return 8;  // the length
    case ValueType::array: return 12;  // element type and count
  }
  return 1;
}

// What is being read, for error messages; the text is built only on failure,
// so reading a 128k-entry vocabulary allocates nothing per entry.
struct What {
  What(const char* t) : text(t) {}  // NOLINT: implicit on purpose, like a string
  What(const std::string& t, int64_t e = -1) : text(t), element(e) {}

  std::string_view text;  // must outlive the read it describes
  int64_t element = -1;   // index within an array, or -1

  std::string str() const {
    std::string s(text);
    if (element >= 0) s += " element " + std::to_string(element);
    return s;
  }
};

}  // namespace

// Reads the file front to back. Every read checks the bytes left first.
class GgufParser {
 public:
  explicit GgufParser(GgufFile& f) : f_(f), base_(f.file_.data()), size_(f.file_.size()) {}

  void parse() {
    parse_header();
    for (uint64_t i = 0; i < n_kv_; ++i) parse_kv(i);
    parse_alignment();
    for (uint64_t i = 0; i < n_tensors_; ++i) parse_tensor_info(i);
    place_tensors();
  }

 private:
  [[noreturn]] void fail(Errc code, const std::string& msg) const { throw Error(code, f_.path() + ": " + msg); }
  [[noreturn]] void fail(const std::string& msg) const { fail(Errc::bad_format, msg); }

  uint64_t left() const { return size_ - pos_; }

  void need(uint64_t n, What what) const {
    if (n > left()) {
      fail("unexpected end of file reading " + what.str() + " at offset " + std::to_string(pos_) + " (need " +
           std::to_string(n) + " bytes, " + std::to_string(left()) + " left)");
    }
  }

  template <class T>
  T read(What what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }

  std::string read_string(What what) {
    const uint64_t at = pos_;
    const auto n = read<uint64_t>(what);
    if (n > left()) {
      fail(what.str() + ": string length " + std::to_string(n) + " at offset " + std::to_string(at) +
           " runs past end of file (" + std::to_string(left()) + " bytes left)");
    }
    std::string s(reinterpret_cast<const char*>(base_ + pos_), n);
    pos_ += n;
    return s;
  }

  // Fails unless `count` values of at least `min_size` bytes fit in the rest
  // of the file; done before any allocation sized by a count from the file.
  void check_count(uint64_t count, uint64_t min_size, const std::string& what) const {
    if (count > left() / min_size) {
      fail(what + " count " + std::to_string(count) + " is impossible: " + std::to_string(count) +
           " entries of at least " + std::to_string(min_size) + " bytes cannot fit in the " +
           std::to_string(left()) + " bytes left in the file");
    }
  }

  void parse_header() {
    const auto magic = read<uint32_t>("the magic");
    if (magic != kMagic) {
      std::string shown;
      for (int i = 0; i < 4; ++i) {
        const auto c = static_cast<unsigned char>((magic >> (8 * i)) & 0xff);
        if (c >= 0x20 && c < 0x7f) {
          shown += static_cast<char>(c);
        } else {
          static constexpr char kHex[] = "0123456789abcdef";
          shown += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
        }
      }
      fail("not a GGUF file: bad magic '" + shown + "', expected 'GGUF'");
    }
    const auto version = read<uint32_t>("the version");
    if (version == 0x02000000u || version == 0x03000000u) {
      fail(Errc::unsupported, "big-endian GGUF files are not supported");
    }
    if (version != 2 && version != 3) {
      fail(Errc::unsupported, "unsupported GGUF version " + std::to_string(version) + " (expected 2 or 3)");
    }
    f_.version_ = version;
    n_tensors_ = read<uint64_t>("the tensor count");
    n_kv_ = read<uint64_t>("the metadata count");
    // A key/value pair is at least a key length, a type and a 1-byte value; a
    // tensor info is at least a name length, n_dims, a type and an offset.
    check_count(n_kv_, 8 + 4 + 1, "metadata");
    check_count(n_tensors_, 8 + 4 + 4 + 8, "tensor");
  }

  ValueType read_type(const std::string& what) {
    const auto id = read<uint32_t>(what + " type");
    if (id > static_cast<uint32_t>(ValueType::f64)) fail(what + " has unknown value type " + std::to_string(id));
    return static_cast<ValueType>(id);
  }

  void parse_kv(uint64_t index) {
    std::string key = read_string("metadata key #" + std::to_string(index));
    const std::string what = "key '" + key + "'";
    const ValueType type = read_type(what);
    Value value = read_value(type, what, 0);
    if (f_.key_index_.count(key) != 0) fail("duplicate key '" + key + "'");
    f_.key_index_.emplace(key, f_.metadata_.size());
    f_.metadata_.emplace_back(std::move(key), std::move(value));
  }

  bool read_bool(What what) {
    const auto b = read<uint8_t>(what);
    if (b > 1) fail(what.str() + " has bool value " + std::to_string(b) + " (must be 0 or 1)");
    return b != 0;
  }

  Value read_value(ValueType type, const std::string& what, int depth) {
    switch (type) {
      case ValueType::u8: return read<uint8_t>(what);
      case ValueType::i8: return read<int8_t>(what);
      case ValueType::u16: return read<uint16_t>(what);
      case ValueType::i16: return read<int16_t>(what);
      case ValueType::u32: return read<uint32_t>(what);
      case ValueType::i32: return read<int32_t>(what);
      case ValueType::f32: return read<float>(what);
      case ValueType::boolean: return read_bool(what);
      case ValueType::string: return read_string(what);
      case ValueType::array: return read_array(what, depth);
      case ValueType::u64: return read<uint64_t>(what);
      case ValueType::i64: return read<int64_t>(what);
      case ValueType::f64: return read<double>(what);
    }
    fail(what + " has unknown value type");
  }

  template <class T>
  std::vector<T> read_plain(uint64_t n) {
    // The count was checked against the bytes left, so this cannot overrun.
    std::vector<T> v(n);
    if (n != 0) std::memcpy(v.data(), base_ + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }

  Array read_array(const std::string& what, int depth) {
    if (depth >= kMaxArrayDepth) fail(what + " nests arrays deeper than " + std::to_string(kMaxArrayDepth));
    const ValueType elem = read_type(what + " array element");
    const auto n = read<uint64_t>(what + " array length");
    check_count(n, min_encoded_size(elem), what + " array element");
    Array a;
    switch (elem) {
      case ValueType::u8: a.items = read_plain<uint8_t>(n); break;
      case ValueType::i8: a.items = read_plain<int8_t>(n); break;
      case ValueType::u16: a.items = read_plain<uint16_t>(n); break;
      case ValueType::i16: a.items = read_plain<int16_t>(n); break;
      case ValueType::u32: a.items = read_plain<uint32_t>(n); break;
      case ValueType::i32: a.items = read_plain<int32_t>(n); break;
      case ValueType::f32: a.items = read_plain<float>(n); break;
      case ValueType::u64: a.items = read_plain<uint64_t>(n); break;
      case ValueType::i64: a.items = read_plain<int64_t>(n); break;
      case ValueType::f64: a.items = read_plain<double>(n); break;
      case ValueType::boolean: {
        std::vector<bool> v(n);
        for (uint64_t i = 0; i < n; ++i) v[i] = read_bool({what, static_cast<int64_t>(i)});
        a.items = std::move(v);
        break;
      }
      case ValueType::string: {
        std::vector<std::string> v;
        v.reserve(n);
        for (uint64_t i = 0; i < n; ++i) v.push_back(read_string({what, static_cast<int64_t>(i)}));
        a.items = std::move(v);
        break;
      }
      case ValueType::array: {
        std::vector<Array> v;
        v.reserve(n);
        for (uint64_t i = 0; i < n; ++i) v.push_back(read_array(what + " element " + std::to_string(i), depth + 1));
        a.items = std::move(v);
        break;
      }
    }
    return a;
  }

  void parse_alignment() {
    if (!f_.has("general.alignment")) return;
    const uint32_t a = f_.get_u32("general.alignment");
    if (a == 0 || (a & (a - 1)) != 0) fail("general.alignment " + std::to_string(a) + " is not a power of two");
    f_.alignment_ = a;
  }

  void parse_tensor_info(uint64_t index) {
    TensorInfo t;
    t.name = read_string("tensor name #" + std::to_string(index));
    const std::string what = "tensor '" + t.name + "'";
    const auto n_dims = read<uint32_t>(what + " n_dims");
    if (n_dims > kMaxDims) {
      fail(what + " has " + std::to_string(n_dims) + " dimensions (at most " + std::to_string(kMaxDims) + ")");
    }
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const auto ne = read<uint64_t>(what + " dimension " + std::to_string(d));
      if (ne > static_cast<uint64_t>(INT64_MAX) ||
          __builtin_mul_overflow(n_elements, static_cast<int64_t>(ne), &n_elements)) {
        fail(what + " has an element count that overflows 64 bits");
      }
      t.shape.push_back(static_cast<int64_t>(ne));
    }
    const auto type_id = read<uint32_t>(what + " type");
    if (!dtype_known(type_id)) {
      fail(Errc::unsupported, what + " has ggml type " + std::to_string(type_id) + " (" + ggml_type_name(type_id) +
                                  "), which Troupe does not support");
    }
    t.type = static_cast<DType>(type_id);
    t.offset = read<uint64_t>(what + " offset");

    const DTypeInfo& info = dtype_info(t.type);
    const int64_t row = t.shape.empty() ? 1 : t.shape[0];
    if (row % info.block_size != 0) {
      fail(what + " row length " + std::to_string(row) + " is not a multiple of the " + std::string(info.name) +
           " block size " + std::to_string(info.block_size));
    }
    // n_elements / block_size blocks; the product can still overflow.
    if (__builtin_mul_overflow(n_elements / info.block_size, info.block_bytes, &t.n_bytes)) {
      fail(what + " has a byte size that overflows 64 bits");
    }
    if (f_.tensor_index_.count(t.name) != 0) fail("duplicate tensor name '" + t.name + "'");
    f_.tensor_index_.emplace(t.name, f_.tensors_.size());
    f_.tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment after the
  // tensor table; each tensor must lie, aligned, inside the file.
  void place_tensors() {
    const uint64_t a = f_.alignment_;
    const uint64_t data_start = (pos_ + a - 1) / a * a;  // pos_ <= size_, so no overflow
    f_.data_offset_ = data_start;
    for (TensorInfo& t : f_.tensors_) {
      const std::string what = "tensor '" + t.name + "'";
      if (t.offset % a != 0) {
        fail(what + " offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
             std::to_string(a));
      }
      const uint64_t n = static_cast<uint64_t>(t.n_bytes);
      if (data_start > size_ || t.offset > size_ - data_start || n > size_ - data_start - t.offset) {
        fail(what + " data (" + std::to_string(n) + " bytes at data offset " + std::to_string(t.offset) +
             ") lies outside the file of " + std::to_string(size_) + " bytes");
      }
      t.data = base_ + data_start + t.offset;
    }
  }

  GgufFile& f_;
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t n_kv_ = 0;
  uint64_t n_tensors_ = 0;
};

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.file_ = MappedFile::open(path);
  GgufParser(f).parse();
  return f;
}

}  // namespace troupe::gguf
