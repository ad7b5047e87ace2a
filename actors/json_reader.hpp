// Strict reading of JSON config files (topologies, workloads): unknown keys
// and wrong types are errors naming the file and the key path
// ("arrival.rate"), so a typo never silently runs a default. Header-only
// over nlohmann-json; include it from .cpp files that link nlohmann_json.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "core/error.hpp"

namespace troupe {

class JsonReader {
 public:
  using json = nlohmann::json;

  explicit JsonReader(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error(Errc::bad_format, origin_ + ": " + (where.empty() ? "" : where + ": ") + what);
  }

  static std::string path(const std::string& where, const char* key) {
    return where.empty() ? std::string(key) : where + "." + key;
  }

  // Parses with `//` comments allowed.
  json parse(std::string_view text) const {
    try {
      return json::parse(text.begin(), text.end(), nullptr, true, /*ignore_comments=*/true);
    } catch (const json::exception& e) {
      // parse_error, and out_of_range for a number too large for a double
      // (1e99999): found by tests/fuzz/config_readers_fuzz.cpp.
      fail("", std::string("not valid JSON: ") + e.what());
    }
  }

  void only_keys(const json& obj, const std::string& where, std::initializer_list<const char*> keys) const {
    if (!obj.is_object()) fail(where, "must be an object");
    for (const auto& [key, value] : obj.items()) {
      bool known = false;
      for (const char* k : keys) known = known || key == k;
      if (!known) fail(where, "unknown key '" + key + "'");
    }
  }

  static const json* find(const json& obj, const char* key) {
    const auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  const json& require(const json& obj, const char* key, const std::string& where) const {
    const json* v = find(obj, key);
    if (v == nullptr) fail(path(where, key), "is required");
    return *v;
  }

  // The getters leave `out` untouched when the key is absent.
  void get(const json& obj, const char* key, const std::string& where, bool& out) const {
    if (const json* v = find(obj, key)) {
      if (!v->is_boolean()) wrong_type(path(where, key), *v, "a boolean");
      out = v->get<bool>();
    }
  }

  void get(const json& obj, const char* key, const std::string& where, std::string& out) const {
    if (const json* v = find(obj, key)) {
      if (!v->is_string()) wrong_type(path(where, key), *v, "a string");
      out = v->get<std::string>();
    }
  }

  void get(const json& obj, const char* key, const std::string& where, double& out) const {
    if (const json* v = find(obj, key)) out = number(*v, path(where, key));
  }

  template <std::integral T>
    requires(!std::same_as<T, bool>)
  void get(const json& obj, const char* key, const std::string& where, T& out) const {
    if (const json* v = find(obj, key)) out = integer<T>(*v, path(where, key));
  }

  double number(const json& v, const std::string& p) const {
    if (!v.is_number()) wrong_type(p, v, "a number");
    const double d = v.get<double>();
    if (!std::isfinite(d)) fail(p, "must be a finite number");
    return d;
  }

  // An integer that fits T (nlohmann keeps values above 2^63 as unsigned).
  template <std::integral T>
  T integer(const json& v, const std::string& p) const {
    if (!v.is_number_integer()) wrong_type(p, v, std::is_signed_v<T> ? "an integer" : "a non-negative integer");
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<T>::max())) fail(p, "is out of range");
      return static_cast<T>(u);
    }
    const int64_t i = v.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (i < 0) fail(p, "must be a non-negative integer (got " + std::to_string(i) + ")");
      if (static_cast<uint64_t>(i) > static_cast<uint64_t>(std::numeric_limits<T>::max())) fail(p, "is out of range");
    } else {
      if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          i > static_cast<int64_t>(std::numeric_limits<T>::max())) {
        fail(p, "is out of range");
      }
    }
    return static_cast<T>(i);
  }

  [[noreturn]] void wrong_type(const std::string& p, const json& v, const char* want) const {
    fail(p, std::string("must be ") + want + " (got " + v.type_name() + ")");
  }

 private:
  std::string origin_;
};

}  // namespace troupe
