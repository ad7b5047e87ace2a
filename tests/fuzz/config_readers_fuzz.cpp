// libFuzzer target for the JSON settings files: a pipeline topology
// (actors/pipeline_config.cpp), a "replicas" list (actors/replica_config.cpp),
// a `troupe serve` config (net/server_config.cpp), a `troupe bench`
// workload (experiments/workload.cpp) and an image processor's config
// (vision/image_processor.cpp: a checkpoint's preprocessor_config.json),
// each reading the same input. Each
// either returns settings or fails with troupe::Error naming the problem.
#include <cstddef>
#include <cstdint>
#include <string>

#include "actors/pipeline_config.hpp"
#include "actors/replica_config.hpp"
#include "core/error.hpp"
#include "experiments/workload.hpp"
#include "net/server_config.hpp"
#include "tests/fuzz/fuzz_util.hpp"
#include "vision/image_processor.hpp"

using namespace troupe::fuzz;

namespace {

template <class F>
void expect_value_or_error(F&& read) {
  try {
    read();
  } catch (const troupe::Error& e) {
    refused(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string base = scratch_dir().string();
  const std::string_view text = as_text(data, size);
  expect_value_or_error([&] { (void)troupe::parse_pipeline_config(text, "fuzz.json"); });
  expect_value_or_error([&] { (void)troupe::parse_replicas(text, "fuzz.json"); });
  expect_value_or_error([&] { (void)troupe::net::parse_serve_config(text, "fuzz.json", base); });
  expect_value_or_error([&] { (void)troupe::parse_workload(text, "fuzz.json", base); });
  expect_value_or_error([&] { (void)troupe::vision::parse_image_processor_config(text, "fuzz.json"); });
  return 0;
}
