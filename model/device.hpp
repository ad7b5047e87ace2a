// Where a stage's layers run: "cpu", or "cuda" / "cuda:N". A device is a
// property of a stage (STYLE 14): the same ModelStage, executor actor and
// messages run on any of them; only the Backend differs.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "kernels/backend.hpp"

namespace troupe {

enum class DeviceKind { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;  // cuda:N

  bool is_cuda() const { return kind == DeviceKind::cuda; }
  std::string str() const;  // "cpu", "cuda:0"
  bool operator==(const Device&) const = default;
};

// "cpu", "cuda" (= "cuda:0") or "cuda:N". Throws Error(invalid_argument)
// naming the text and the accepted forms.
Device parse_device(std::string_view text);

// What a stage's backend must hold, for the start-up memory check.
struct DeviceNeeds {
  size_t weight_bytes = 0;
  size_t kv_bytes = 0;
  size_t arena_bytes = 0;
};

// A backend on `device`: a CpuBackend with `threads` kernel threads, or a
// CudaBackend. Each failure is one sentence naming the device, as Error:
//   unsupported: no CUDA backend in this build; no usable GPU or driver;
//   invalid_argument: cuda:N with N past the devices this machine has;
//   out_of_memory: the bytes `needs` asks for (weights + KV + arena + the
//                  backend's own workspace) exceed the device's free bytes.
std::unique_ptr<Backend> open_backend(const Device& device, int threads, const DeviceNeeds& needs = {});

}  // namespace troupe
