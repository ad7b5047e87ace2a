#include "tools/cli/quantize_option.hpp"

#include <CLI/CLI.hpp>

#include <exception>

namespace troupe::cli {

CLI::Option* add_quantize_option(CLI::App* cmd, std::string* name) {
  return cmd
      ->add_option("--quantize", *name,
                   "Convert float weights at load: one type (q8_0, q4_0, q4_1, q5_0, q5_1, mxfp4, f16, bf16) or "
                   "llama.cpp's mix of a file type (q2_k, q3_k_m, q4_k_m, q5_k_m, q6_k, iq4_nl, iq4_xs). "
                   "Matrices already quantized (a GGUF's, a GPTQ or AWQ release's 4-bit blocks) stay as they are; "
                   "an FP8 release's are floats after load and are converted")
      ->check([](const std::string& v) -> std::string {
        try {
          parse_quant_scheme(v);
          return {};
        } catch (const std::exception& e) {
          return e.what();
        }
      });
}

std::optional<QuantScheme> quantize_scheme(const std::string& name) {
  if (name.empty()) return std::nullopt;
  return parse_quant_scheme(name);
}

std::string quantize_note(const std::optional<QuantScheme>& scheme) {
  return scheme ? ", float weights to " + scheme->name + " at load" : std::string();
}

}  // namespace troupe::cli
