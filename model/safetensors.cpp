// safetensors reader: header validation (every check names the file and the
// tensor), and sharded checkpoints through model.safetensors.index.json.
#include "model/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.hpp"

namespace troupe::safetensors {
namespace {

using json = nlohmann::json;

struct DTypeSpec {
  std::string_view name;
  int bits;                   // per element
  std::optional<DType> type;  // the dtypes Troupe computes with
};

// The safetensors dtype names. Only F32, F16 and BF16 are computed with; the
// others are recognised so their byte ranges can still be validated and the
// error can say "unsupported" rather than "corrupt".
constexpr DTypeSpec kDTypes[] = {
    {"F32", 32, DType::f32},    {"F16", 16, DType::f16},      {"BF16", 16, DType::bf16},
    {"F64", 64, std::nullopt},  {"I64", 64, std::nullopt},    {"U64", 64, std::nullopt},
    {"I32", 32, std::nullopt},  {"U32", 32, std::nullopt},    {"I16", 16, std::nullopt},
    {"U16", 16, std::nullopt},  {"I8", 8, std::nullopt},      {"U8", 8, std::nullopt},
    {"BOOL", 8, std::nullopt},  {"F8_E4M3", 8, std::nullopt}, {"F8_E5M2", 8, std::nullopt},
    {"F8_E8M0", 8, std::nullopt}, {"F6_E2M3", 6, std::nullopt}, {"F6_E3M2", 6, std::nullopt},
    {"F4", 4, std::nullopt},    {"C64", 64, std::nullopt},
};

const DTypeSpec* find_dtype(std::string_view name) {
  for (const DTypeSpec& d : kDTypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

class HeaderParser {
 public:
  explicit HeaderParser(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& what) const { throw Error(Errc::bad_format, path_ + ": " + what); }
  [[noreturn]] void fail_tensor(const std::string& name, const std::string& what) const {
    fail("tensor '" + name + "': " + what);
  }

  // Shape dimensions and offsets are JSON integers >= 0.
  int64_t non_negative(const json& v, const std::string& name, const char* field) const {
    if (!v.is_number_integer()) fail_tensor(name, std::string(field) + " holds a non-integer");
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) fail_tensor(name, std::string(field) + " value is too large");
      return static_cast<int64_t>(u);
    }
    const int64_t i = v.get<int64_t>();
    if (i < 0) fail_tensor(name, std::string(field) + " holds a negative value " + std::to_string(i));
    return i;
  }

  TensorInfo tensor(const std::string& name, const json& entry, const uint8_t* data, uint64_t data_size) const {
    if (!entry.is_object()) fail_tensor(name, "entry is not a JSON object");
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(key)) fail_tensor(name, std::string("missing '") + key + "'");
    }
    TensorInfo t;
    t.name = name;
    t.file = path_;
    if (!entry["dtype"].is_string()) fail_tensor(name, "dtype is not a string");
    t.dtype = entry["dtype"].get<std::string>();
    const DTypeSpec* spec = find_dtype(t.dtype);
    if (spec == nullptr) fail_tensor(name, "unknown dtype '" + t.dtype + "'");
    t.type = spec->type;

    const json& shape = entry["shape"];
    if (!shape.is_array()) fail_tensor(name, "shape is not an array");
    // Element count, guarding against overflow: bytes must fit the file.
    uint64_t n_elements = 1;
    for (const json& d : shape) {
      const int64_t dim = non_negative(d, name, "shape");
      t.shape.push_back(dim);
      if (dim != 0 && n_elements > (UINT64_MAX / 8) / static_cast<uint64_t>(dim)) {
        fail_tensor(name, "shape is too large");
      }
      n_elements *= static_cast<uint64_t>(dim);
    }

    const json& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2) fail_tensor(name, "data_offsets is not a [begin, end] pair");
    const auto begin = static_cast<uint64_t>(non_negative(offsets[0], name, "data_offsets"));
    const auto end = static_cast<uint64_t>(non_negative(offsets[1], name, "data_offsets"));
    if (end < begin) {
      fail_tensor(name, "data_offsets end " + std::to_string(end) + " is before begin " + std::to_string(begin));
    }
    if (end > data_size) {
      fail_tensor(name, "data_offsets end " + std::to_string(end) + " is past the " + std::to_string(data_size) +
                            "-byte data section (truncated file?)");
    }
    const uint64_t bits = n_elements * static_cast<uint64_t>(spec->bits);
    if (bits % 8 != 0 || bits / 8 != end - begin) {
      fail_tensor(name, "shape " + shape.dump() + " of " + t.dtype + " needs " + std::to_string(bits / 8) +
                            " bytes but data_offsets cover " + std::to_string(end - begin));
    }
    t.data = data + begin;
    t.n_bytes = static_cast<int64_t>(end - begin);
    return t;
  }

 private:
  const std::string& path_;
};

[[noreturn]] void index_error(const std::string& path, const std::string& what) {
  throw Error(Errc::bad_format, path + ": " + what);
}

}  // namespace

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

File File::open(const std::string& path) {
  File f;
  f.map_ = MappedFile::open(path);
  const HeaderParser p(f.map_.path());
  const uint64_t size = f.map_.size();
  if (size < 8) p.fail("truncated: " + std::to_string(size) + " bytes, smaller than the 8-byte header length");
  uint8_t len_bytes[8];
  std::memcpy(len_bytes, f.map_.data(), 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];  // little-endian
  if (header_len > kMaxHeaderBytes) {
    p.fail("header length " + std::to_string(header_len) + " exceeds the " + std::to_string(kMaxHeaderBytes) +
           "-byte limit (corrupt header length)");
  }
  if (header_len > size - 8) {
    p.fail("truncated: header length " + std::to_string(header_len) + " runs past the end of the " +
           std::to_string(size) + "-byte file");
  }
  const auto* text = reinterpret_cast<const char*>(f.map_.data() + 8);
  json header;
  try {
    header = json::parse(text, text + header_len);
  } catch (const json::exception& e) {  // also out_of_range: a number past a double (1e99999)
    p.fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) p.fail("header is not a JSON object");

  const uint8_t* data = f.map_.data() + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) p.fail("__metadata__ is not a JSON object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) p.fail("__metadata__ value of '" + k + "' is not a string");
        f.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    f.tensors_.push_back(p.tensor(name, entry, data, data_size));
  }

  // No two tensors may share bytes: sort the ranges and compare neighbours.
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : f.tensors_) {
    if (t.n_bytes > 0) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->data < b->data; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo* a = by_offset[i - 1];
    const TensorInfo* b = by_offset[i];
    if (a->data + a->n_bytes > b->data) {
      p.fail("tensors '" + a->name + "' and '" + b->name + "' overlap in the data section");
    }
  }
  for (size_t i = 0; i < f.tensors_.size(); ++i) f.index_.emplace(f.tensors_[i].name, i);
  return f;
}

const TensorInfo* File::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Checkpoint Checkpoint::open_file(const std::string& path) {
  Checkpoint c;
  c.dir_ = std::filesystem::path(path).parent_path().string();
  c.files_.push_back(File::open(path));
  for (const TensorInfo& t : c.files_.back().tensors()) c.index_.emplace(t.name, &t);
  return c;
}

Checkpoint Checkpoint::open_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (!fs::exists(index_path)) {
    if (!fs::exists(single)) {
      throw Error(Errc::io, dir + ": no model.safetensors or model.safetensors.index.json in the directory");
    }
    return open_file(single.string());
  }

  const std::string ipath = index_path.string();
  auto fail = [&ipath](const std::string& what) { index_error(ipath, what); };
  std::ifstream in(index_path);
  if (!in) throw Error(Errc::io, ipath + ": cannot open");
  json index;
  try {
    index = json::parse(in);
  } catch (const json::exception& e) {  // also out_of_range: a number past a double (1e99999)
    fail(std::string("not valid JSON: ") + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    fail("no 'weight_map' object");
  }

  // Shards in name order, each opened once; names must stay in the directory.
  std::set<std::string> shard_names;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) fail("tensor '" + tensor + "' maps to a non-string shard name");
    const std::string s = shard.get<std::string>();
    if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos || s.find('\\') != std::string::npos) {
      fail("tensor '" + tensor + "' maps to shard '" + s + "', which is not a file name inside the directory");
    }
    shard_names.insert(s);
  }
  if (shard_names.empty()) fail("'weight_map' is empty");

  Checkpoint c;
  c.dir_ = dir;
  std::map<std::string, size_t> shard_of;
  for (const std::string& s : shard_names) {
    shard_of[s] = c.files_.size();
    c.files_.push_back(File::open((fs::path(dir) / s).string()));
  }
  // A tensor stored in two shards would be ambiguous whichever the index names.
  std::map<std::string, std::string, std::less<>> seen;
  for (const File& f : c.files_) {
    for (const TensorInfo& t : f.tensors()) {
      auto [it, fresh] = seen.emplace(t.name, f.path());
      if (!fresh) fail("tensor '" + t.name + "' is stored in both " + it->second + " and " + f.path());
    }
  }
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    const File& f = c.files_[shard_of[shard.get<std::string>()]];
    const TensorInfo* t = f.find(tensor);
    if (t == nullptr) fail("tensor '" + tensor + "' is mapped to " + f.path() + ", which does not contain it");
    c.index_.emplace(tensor, t);
  }
  return c;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const TensorInfo& Checkpoint::tensor(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) throw Error(Errc::bad_format, dir_ + ": missing tensor '" + std::string(name) + "'");
  if (!t->type) {
    throw Error(Errc::unsupported, t->file + ": tensor '" + t->name + "' has dtype " + t->dtype + " " +
                                       shape_string(t->shape) + "; supported dtypes are F32, F16 and BF16");
  }
  return *t;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, t] : index_) out.push_back(name);
  return out;
}

}  // namespace troupe::safetensors
