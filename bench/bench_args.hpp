// Command lines of the benchmarks: flags that each take one value, and
// values that list several items with commas ("--threads 1,2").
#pragma once

#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace troupe::bench {

inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

// on_flag(flag, value) for each "--flag value" pair of argv; a flag without
// a value is an Error, as on_flag makes an unknown one.
inline void for_each_flag(int argc, char** argv,
                          const std::function<void(const std::string&, const std::string&)>& on_flag) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw Error(Errc::invalid_argument, flag + " needs a value");
    on_flag(flag, argv[++i]);
  }
}

}  // namespace troupe::bench
