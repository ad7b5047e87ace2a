// Builds GGUF v3 files: metadata in the order added, then the tensor table and
// the aligned data section. Tensor data can come from a callback that fills a
// few rows at a time, so a multi-gigabyte model is written without holding it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "model/gguf.hpp"

namespace troupe::gguf {

struct GgufWriterOptions {
  uint32_t version = 3;                     // 2 and 3 share a layout
  uint32_t alignment = kDefaultAlignment;   // written as general.alignment when not 32
};

class GgufWriter {
 public:
  // Fills rows [first_row, first_row + n_rows) of a tensor into dst, which
  // has room for n_rows * row_bytes(type, shape[0]) bytes. A row is shape[0]
  // elements; a tensor has n_elements / shape[0] rows.
  using RowSource = std::function<void(int64_t first_row, int64_t n_rows, uint8_t* dst)>;

  explicit GgufWriter(GgufWriterOptions options = {});

  // Metadata. Keys must be unique; general.alignment comes from the options.
  // Throws Error(invalid_argument) otherwise.
  void add(std::string key, Value value);
  void add_u32(std::string key, uint32_t v) { add(std::move(key), Value{v}); }
  void add_i32(std::string key, int32_t v) { add(std::move(key), Value{v}); }
  void add_u64(std::string key, uint64_t v) { add(std::move(key), Value{v}); }
  void add_i64(std::string key, int64_t v) { add(std::move(key), Value{v}); }
  void add_f32(std::string key, float v) { add(std::move(key), Value{v}); }
  void add_f64(std::string key, double v) { add(std::move(key), Value{v}); }
  void add_bool(std::string key, bool v) { add(std::move(key), Value{v}); }
  void add_string(std::string key, std::string v) { add(std::move(key), Value{std::move(v)}); }
  void add_array(std::string key, Array v) { add(std::move(key), Value{std::move(v)}); }
  void add_string_array(std::string key, std::vector<std::string> v);
  void add_f32_array(std::string key, std::vector<float> v);
  void add_i32_array(std::string key, std::vector<int32_t> v);

  // Tensors, written in the order added. shape is in GGUF order (shape[0] is
  // the row length), 1 to 4 dimensions, each > 0, and shape[0] a multiple of
  // the type's block size. The bytes overload copies; it needs exactly
  // n_elements / block_size * block_bytes bytes.
  void add_tensor(std::string name, DType type, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
  void add_tensor(std::string name, DType type, std::vector<int64_t> shape, RowSource source);

  // Writes the file (to "<path>.part", renamed to path when complete).
  // Throws Error(io) naming the path; exceptions from a RowSource propagate
  // and leave no file behind.
  void write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
    int64_t n_bytes;
    RowSource source;
  };

  // Validates a new tensor; returns its size in bytes.
  int64_t checked_bytes(const std::string& name, DType type, const std::vector<int64_t>& shape) const;
  class Encoder;  // gguf_writer.cpp
  void encode_header(Encoder& e) const;  // metadata and tensor table

  GgufWriterOptions options_;
  std::vector<std::pair<std::string, Value>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace troupe::gguf
