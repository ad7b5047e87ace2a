// safetensors checkpoints (Hugging Face's weight format): an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype, shape
// and byte range, then the raw data, used in place from a read-only mapping.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "memory/mapped_file.hpp"

namespace troupe::safetensors {

// Largest header accepted (the reference implementation's limit): a length
// beyond it is a corrupt file, not a model.
inline constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct TensorInfo {
  std::string name;
  std::string file;                // the file holding it (for error messages)
  std::string dtype;               // as the header spells it: "F32", "BF16", "I64", ...
  std::optional<DType> type;       // set for the dtypes Troupe computes with: F32, F16, BF16
  std::vector<int64_t> shape;      // outermost first, as torch stores it ([n_out, n_in] for nn.Linear)
  const uint8_t* data = nullptr;   // inside the mapping; no alignment is promised
  int64_t n_bytes = 0;

  int64_t n_elements() const;
};

// "[2, 3]": a shape as the error messages give it.
std::string shape_string(const std::vector<int64_t>& shape);

// One .safetensors file, validated in full when opened: the header is a JSON
// object; every tensor has a known dtype, a shape whose byte size matches its
// range, and a range inside the data section that overlaps no other tensor.
class File {
 public:
  // Throws Error(io) if the file cannot be mapped, Error(bad_format) naming
  // the file (and the tensor) for anything corrupt, truncated or inconsistent.
  static File open(const std::string& path);

  const std::string& path() const { return map_.path(); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile map_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
  std::map<std::string, std::string> metadata_;
};

// A model directory's weights: model.safetensors, or the shards that
// model.safetensors.index.json maps tensor names to.
class Checkpoint {
 public:
  // Throws Error(io) when the directory has neither file, Error(bad_format)
  // for a malformed index (naming the tensor or shard at fault).
  static Checkpoint open_dir(const std::string& dir);
  static Checkpoint open_file(const std::string& path);

  const std::string& dir() const { return dir_; }
  const std::vector<File>& files() const { return files_; }
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  // A tensor Troupe can compute with. Throws Error(bad_format) "missing
  // tensor" or Error(unsupported) naming the tensor, its file and its dtype.
  const TensorInfo& tensor(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::string dir_;
  std::vector<File> files_;
  std::map<std::string, const TensorInfo*, std::less<>> index_;
};

}  // namespace troupe::safetensors
