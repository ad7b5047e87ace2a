// GGUF (v3, and v2 which has the same layout) model files: metadata and the
// tensor table, validated in full when the file is opened, with tensor data
// used in place from a read-only memory mapping.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/dtype.hpp"
#include "memory/mapped_file.hpp"

namespace troupe::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;

// Metadata value type ids, as stored in the file.
enum class ValueType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};
std::string_view value_type_name(ValueType t);  // "u32", "string", ...

// A metadata array: one typed vector, the alternative's index being the
// element's ValueType id. Arrays of arrays are allowed, each inner array with
// its own element type.
struct Array {
  using Items = std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>,
                             std::vector<int16_t>, std::vector<uint32_t>, std::vector<int32_t>,
                             std::vector<float>, std::vector<bool>, std::vector<std::string>,
                             std::vector<Array>, std::vector<uint64_t>, std::vector<int64_t>,
                             std::vector<double>>;
  Items items;

  ValueType type() const { return static_cast<ValueType>(items.index()); }
  size_t size() const;
  bool operator==(const Array&) const = default;
};

// A metadata value; the alternative's index is its ValueType id.
using Value = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool,
                           std::string, Array, uint64_t, int64_t, double>;
inline ValueType value_type(const Value& v) { return static_cast<ValueType>(v.index()); }
// "u32", "string", "array of f32", "array of array of i8", ...
std::string describe_type(const Value& v);

struct TensorInfo {
  std::string name;
  DType type = DType::f32;
  std::vector<int64_t> shape;  // GGUF order: shape[0] is the row length (ne0)
  uint64_t offset = 0;         // from the start of the data section
  // In the mapping, aligned to GgufFile::alignment() (32 unless the file says
  // otherwise; a file may legally ask for less than a float's alignment).
  const void* data = nullptr;
  int64_t n_bytes = 0;  // of `data`

  int64_t n_elements() const;
};

class GgufFile {
 public:
  // Maps the file and validates the header, every metadata value and the whole
  // tensor table. Throws Error(bad_format | unsupported) naming the file and
  // the problem (and the key or tensor), or Error(io) if it cannot be mapped.
  static GgufFile open(const std::string& path);

  uint32_t version() const { return version_; }
  const std::string& path() const { return file_.path(); }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section
  const MappedFile& file() const { return file_; }

  // --- metadata ---
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const Value* find(std::string_view key) const;  // nullptr when absent
  // Every key/value pair in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return metadata_; }

  // Required keys: throw Error(bad_format) "missing required key 'x'" or
  // "key 'x' has type T, expected U". Integer getters accept any integer type
  // whose value fits; float getters accept f32 and f64.
  const std::string& get_string(std::string_view key) const;
  uint32_t get_u32(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::vector<std::string>& get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<int32_t> get_i32_array(std::string_view key) const;

  // Optional keys: empty when absent, but a present key of the wrong type
  // still throws as above.
  std::optional<std::string> find_string(std::string_view key) const;
  std::optional<uint32_t> find_u32(std::string_view key) const;
  std::optional<int64_t> find_i64(std::string_view key) const;
  std::optional<float> find_f32(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;
  const std::vector<std::string>* find_string_array(std::string_view key) const;  // no copy
  std::optional<std::vector<float>> find_f32_array(std::string_view key) const;
  std::optional<std::vector<int32_t>> find_i32_array(std::string_view key) const;
  std::optional<std::vector<bool>> find_bool_array(std::string_view key) const;

  // --- tensors ---
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent
  const TensorInfo& tensor(std::string_view name) const;       // throws "missing tensor 'x'"
  // Throws Error(bad_format) "tensor 'x' has shape [a, b], expected [c, d]".
  void expect_shape(const TensorInfo& t, std::initializer_list<int64_t> shape) const;

 private:
  friend class GgufParser;  // fills in the members while validating (gguf.cpp)
  [[noreturn]] void fail_type(std::string_view key, const Value& v, std::string_view expected) const;
  const Value& require(std::string_view key) const;

  MappedFile file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::map<std::string, size_t, std::less<>> key_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace troupe::gguf
