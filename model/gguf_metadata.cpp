// Typed access to GGUF metadata and the tensor table. Getters convert between
// integer widths only when the value fits, so a model loader can ask for the
// type it needs whatever width the converter chose.
#include <type_traits>
#include <utility>

#include "core/error.hpp"
#include "model/gguf.hpp"

namespace troupe::gguf {
namespace {

template <class T>
constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

enum class Conv { ok, wrong_type, out_of_range };

// Converts an integer value of any width to To when it fits.
template <class To>
Conv integer_as(const Value& v, To& out, std::string& shown) {
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (kIsInteger<T>) {
          if (!std::in_range<To>(x)) {
            shown = std::to_string(x);
            return Conv::out_of_range;
          }
          out = static_cast<To>(x);
          return Conv::ok;
        } else {
          return Conv::wrong_type;
        }
      },
      v);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string describe_array(const Array& a) {
  if (a.type() != ValueType::array) return "array of " + std::string(value_type_name(a.type()));
  const auto& inner = std::get<std::vector<Array>>(a.items);
  return inner.empty() ? "array of array" : "array of " + describe_array(inner.front());
}

}  // namespace

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::u8: return "u8";
    case ValueType::i8: return "i8";
    case ValueType::u16: return "u16";
    case ValueType::i16: return "i16";
    case ValueType::u32: return "u32";
    case ValueType::i32: return "i32";
    case ValueType::f32: return "f32";
    case ValueType::boolean: return "bool";
    case ValueType::string: return "string";
    case ValueType::array: return "array";
    case ValueType::u64: return "u64";
    case ValueType::i64: return "i64";
    case ValueType::f64: return "f64";
  }
  return "unknown";
}

size_t Array::size() const {
  return std::visit([](const auto& v) { return v.size(); }, items);
}

std::string describe_type(const Value& v) {
  if (const auto* a = std::get_if<Array>(&v)) return describe_array(*a);
  return std::string(value_type_name(value_type(v)));
}

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // checked against overflow when the file was opened
  return n;
}

// --- metadata ---

const Value* GgufFile::find(std::string_view key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const Value& GgufFile::require(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) throw Error(Errc::bad_format, path() + ": missing required key '" + std::string(key) + "'");
  return *v;
}

void GgufFile::fail_type(std::string_view key, const Value& v, std::string_view expected) const {
  throw Error(Errc::bad_format, path() + ": key '" + std::string(key) + "' has type " + describe_type(v) +
                                    ", expected " + std::string(expected));
}

std::optional<std::string> GgufFile::find_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}

const std::string& GgufFile::get_string(std::string_view key) const {
  const Value& v = require(key);
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  fail_type(key, v, "string");
}

std::optional<uint32_t> GgufFile::find_u32(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_u32(key);
}

uint32_t GgufFile::get_u32(std::string_view key) const {
  const Value& v = require(key);
  uint32_t out = 0;
  std::string shown;
  switch (integer_as(v, out, shown)) {
    case Conv::ok: return out;
    case Conv::wrong_type: fail_type(key, v, "u32");
    case Conv::out_of_range: break;
  }
  throw Error(Errc::bad_format,
              path() + ": key '" + std::string(key) + "' value " + shown + " is out of range for u32");
}

std::optional<int64_t> GgufFile::find_i64(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_i64(key);
}

int64_t GgufFile::get_i64(std::string_view key) const {
  const Value& v = require(key);
  int64_t out = 0;
  std::string shown;
  switch (integer_as(v, out, shown)) {
    case Conv::ok: return out;
    case Conv::wrong_type: fail_type(key, v, "i64");
    case Conv::out_of_range: break;
  }
  throw Error(Errc::bad_format,
              path() + ": key '" + std::string(key) + "' value " + shown + " is out of range for i64");
}

std::optional<float> GgufFile::find_f32(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_f32(key);
}

float GgufFile::get_f32(std::string_view key) const {
  const Value& v = require(key);
  if (const auto* f = std::get_if<float>(&v)) return *f;
  if (const auto* d = std::get_if<double>(&v)) return static_cast<float>(*d);
  fail_type(key, v, "f32");
}

std::optional<bool> GgufFile::find_bool(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_bool(key);
}

bool GgufFile::get_bool(std::string_view key) const {
  const Value& v = require(key);
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  fail_type(key, v, "bool");
}

const std::vector<std::string>* GgufFile::find_string_array(std::string_view key) const {
  if (!has(key)) return nullptr;
  return &get_string_array(key);
}

const std::vector<std::string>& GgufFile::get_string_array(std::string_view key) const {
  const Value& v = require(key);
  if (const auto* a = std::get_if<Array>(&v)) {
    if (const auto* s = std::get_if<std::vector<std::string>>(&a->items)) return *s;
  }
  fail_type(key, v, "array of string");
}

std::optional<std::vector<float>> GgufFile::find_f32_array(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_f32_array(key);
}

std::vector<float> GgufFile::get_f32_array(std::string_view key) const {
  const Value& v = require(key);
  if (const auto* a = std::get_if<Array>(&v)) {
    if (const auto* f = std::get_if<std::vector<float>>(&a->items)) return *f;
    if (const auto* d = std::get_if<std::vector<double>>(&a->items)) return {d->begin(), d->end()};
  }
  fail_type(key, v, "array of f32");
}

std::optional<std::vector<int32_t>> GgufFile::find_i32_array(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_i32_array(key);
}

std::vector<int32_t> GgufFile::get_i32_array(std::string_view key) const {
  const Value& v = require(key);
  const auto* a = std::get_if<Array>(&v);
  if (a == nullptr) fail_type(key, v, "array of i32");
  return std::visit(
      [&](const auto& items) -> std::vector<int32_t> {
        using T = typename std::decay_t<decltype(items)>::value_type;
        if constexpr (kIsInteger<T>) {
          std::vector<int32_t> out(items.size());
          for (size_t i = 0; i < items.size(); ++i) {
            if (!std::in_range<int32_t>(items[i])) {
              throw Error(Errc::bad_format, path() + ": key '" + std::string(key) + "' element " +
                                                std::to_string(i) + " value " + std::to_string(items[i]) +
                                                " is out of range for i32");
            }
            out[i] = static_cast<int32_t>(items[i]);
          }
          return out;
        } else {
          fail_type(key, v, "array of i32");
        }
      },
      a->items);
}

std::optional<std::vector<bool>> GgufFile::find_bool_array(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  const Value& v = require(key);
  const auto* a = std::get_if<Array>(&v);
  const auto* items = a != nullptr ? std::get_if<std::vector<bool>>(&a->items) : nullptr;
  if (items == nullptr) fail_type(key, v, "array of bool");
  return *items;
}

// --- tensors ---

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& GgufFile::tensor(std::string_view name) const {
  const TensorInfo* t = find_tensor(name);
  if (t == nullptr) throw Error(Errc::bad_format, path() + ": missing tensor '" + std::string(name) + "'");
  return *t;
}

void GgufFile::expect_shape(const TensorInfo& t, std::initializer_list<int64_t> shape) const {
  if (std::equal(t.shape.begin(), t.shape.end(), shape.begin(), shape.end())) return;
  throw Error(Errc::bad_format, path() + ": tensor '" + t.name + "' has shape " + shape_string(t.shape) +
                                    ", expected " + shape_string(std::vector<int64_t>(shape)));
}

}  // namespace troupe::gguf
