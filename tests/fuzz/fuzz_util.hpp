// Helpers shared by the libFuzzer targets in this folder: a hard check that
// a sanitizer-instrumented run turns into a crash report, and a scratch file
// for readers that take a path (GGUF, safetensors, config.json).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace troupe::fuzz {

// A broken invariant: libFuzzer reports the trap with the input that caused it.
inline void check(bool ok) {
  if (!ok) __builtin_trap();
}

// An expected refusal. With TROUPE_FUZZ_VERBOSE set (replaying seeds by
// hand) it is printed, to see how far each seed gets.
inline void refused(const std::exception& e) {
  static const bool verbose = std::getenv("TROUPE_FUZZ_VERBOSE") != nullptr;
  check(e.what()[0] != '\0');
  if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A folder of its own under the temp directory, one per fuzzing process
// (libFuzzer's -jobs/-workers run several), removed when the process exits.
inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path;
    Dir() {
      path = std::filesystem::temp_directory_path() / ("troupe-fuzz-" + std::to_string(::getpid()));
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

inline void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Splits an input at the first occurrence of `marker`: (before, after); no
// marker: (all, "").
inline std::pair<std::string_view, std::string_view> split(std::string_view text, std::string_view marker) {
  const size_t at = text.find(marker);
  if (at == std::string_view::npos) return {text, {}};
  return {text.substr(0, at), text.substr(at + marker.size())};
}

}  // namespace troupe::fuzz
