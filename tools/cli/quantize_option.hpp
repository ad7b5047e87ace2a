// `--quantize NAME`, taken by every `troupe` command that loads a model:
// float weights converted at load to one type or to a llama.cpp file type's
// mix (model/quant_scheme.hpp).
#pragma once

#include <optional>
#include <string>

#include "model/quant_scheme.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace troupe::cli {

CLI::Option* add_quantize_option(CLI::App* cmd, std::string* name);
// Empty: no conversion.
std::optional<QuantScheme> quantize_scheme(const std::string& name);
// For the loading line: "" or ", float weights to q4_k_m at load" (the
// conversion is most of a mixed load's time).
std::string quantize_note(const std::optional<QuantScheme>& scheme);

}  // namespace troupe::cli
