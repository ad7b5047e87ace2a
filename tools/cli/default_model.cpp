// Resolves the model cache from the environment; only the CLI reads it.
#include "tools/cli/default_model.hpp"

#include <cstdlib>
#include <filesystem>

#include "core/error.hpp"

namespace troupe::cli {

std::string model_cache_dir() {
  if (const char* dir = std::getenv("TROUPE_MODEL_CACHE"); dir != nullptr && *dir != '\0') return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::string(xdg) + "/troupe/models";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/troupe/models";
}

std::string default_model_path() {
  const std::string path = model_cache_dir() + "/" + kDefaultModelFile;
  if (!std::filesystem::exists(path)) {
    throw Error(Errc::io, "default model not found at " + path +
                              "; run scripts/setup (it fetches it), or pass --model FILE.gguf");
  }
  return path;
}

}  // namespace troupe::cli
